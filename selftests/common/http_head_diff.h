/* http_head_diff.h — the proxy's fast head readers (fg_req_head_fast,
 * fg_resp_head_fast in agent/http/http_headers.c) checked against http_parser on
 * the same bytes: whenever a fast reader takes a head, http_parser must read
 * the same head to the same end, with the same method, target, status,
 * headers (names and values byte for byte), Content-Length and keep-alive,
 * and without an error. Shared by test_proxy_http (chosen cases) and
 * fuzz_http_heads (any bytes). Header-only: each includer gets its own
 * copy of these few static functions. */
#ifndef FAIRGATE_HTTP_HEAD_DIFF_H
#define FAIRGATE_HTTP_HEAD_DIFF_H

#include <http_parser.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include "agent/http/http_headers.h"

struct head_ref {
	struct fg_hdrs h;
	uint32_t url_len;
	bool done;
	int status;
	uint64_t content_length;
	bool keep_alive;
};

static int head_ref_url(http_parser *p, const char *at, size_t len)
{
	struct head_ref *r = p->data;

	r->url_len += (uint32_t)len;
	return fg_buf_append(&r->h.raw, at, len);
}

static int head_ref_field(http_parser *p, const char *at, size_t len)
{
	return fg_hdrs_on_field(&((struct head_ref *)p->data)->h, at, len);
}

static int head_ref_value(http_parser *p, const char *at, size_t len)
{
	return fg_hdrs_on_value(&((struct head_ref *)p->data)->h, at, len);
}

static int head_ref_done(http_parser *p)
{
	struct head_ref *r = p->data;

	r->done = true;
	r->status = (int)p->status_code;
	r->content_length = p->content_length;
	r->keep_alive = http_should_keep_alive(p);
	http_parser_pause(p, 1); /* the head's end is where it stops */
	return 0;
}

static const http_parser_settings head_ref_settings = {
	.on_url = head_ref_url,
	.on_header_field = head_ref_field,
	.on_header_value = head_ref_value,
	.on_headers_complete = head_ref_done,
};

/* got's headers against ref's: NULL when they are the same, else what differs. */
static const char *head_diff_headers(const struct fg_hdrs *got, const struct fg_hdrs *ref)
{
	if (got->n != ref->n)
		return "header count";
	for (uint32_t k = 0; k < got->n; k++) {
		size_t gl, rl;
		const char *gv = fg_hdr_value(got, k, &gl), *rv = fg_hdr_value(ref, k, &rl);

		if (got->h[k].name_len != ref->h[k].name_len ||
		    memcmp(got->raw.data + got->h[k].name, ref->raw.data + ref->h[k].name,
			   got->h[k].name_len))
			return "a header name";
		if (gl != rl || memcmp(gv, rv, gl))
			return "a header value";
	}
	return NULL;
}

/* 0: the fast reader declined and left its headers empty; 1: it read the
 * head and http_parser agrees; -1: they differ, *why says where. */
static int head_diff(const char *t, size_t n, bool request, const char **why)
{
	struct fg_hdrs got = { 0 };
	struct head_ref ref = { 0 };
	int method = -1, status = 0, rc = 1;
	uint32_t url = UINT32_MAX, url_len = 0;
	uint64_t len = 0;
	size_t head = request ? fg_req_head_fast(t, n, &got, &method, &url, &url_len, &len)
			      : fg_resp_head_fast(t, n, &got, &status, &len);
	http_parser p;

	*why = NULL;
	if (!head) {
		if (got.n || got.raw.len)
			*why = "declined but left headers behind";
		fg_buf_free(&got.raw);
		return *why ? -1 : 0;
	}
	http_parser_init(&p, request ? HTTP_REQUEST : HTTP_RESPONSE);
	p.data = &ref;
	size_t used = http_parser_execute(&p, &head_ref_settings, t, n);
	if (!ref.done || HTTP_PARSER_ERRNO(&p) != HPE_PAUSED)
		*why = "http_parser did not read the head";
	else if (head != used + 1) /* paused there, before the last LF */
		*why = "where the head ends";
	else if (!ref.keep_alive)
		*why = "keep-alive";
	else if (request && method != (int)p.method)
		*why = "method";
	else if (request && (url != 0 || url_len != ref.url_len ||
			     memcmp(got.raw.data, ref.h.raw.data, url_len)))
		*why = "target";
	else if (!request && status != ref.status)
		*why = "status";
	else if (!(len == ref.content_length ||
		   /* no Content-Length: http_parser says ULLONG_MAX, or 0 for a request */
		   (len == UINT64_MAX && (ref.content_length == ULLONG_MAX ||
					  (request && ref.content_length == 0)))))
		*why = "Content-Length";
	else
		*why = head_diff_headers(&got, &ref.h);
	if (*why)
		rc = -1;
	fg_buf_free(&got.raw);
	fg_buf_free(&ref.h.raw);
	return rc;
}

#endif
