/* http_headers.h — a request's or response's header block, collected from
 * libhttp-parser callbacks (which may split a name or value across reads)
 * or read by the fast paths for the common heads; the hop-by-hop rule. */
#ifndef FAIRGATE_HTTP_HEADERS_H
#define FAIRGATE_HTTP_HEADERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "lib/buf.h"

#define FG_MAX_HEADERS 100

/* Header name/value pairs as offsets into one buffer. */
struct fg_hdr {
	uint32_t name, name_len, value, value_len;
};
struct fg_hdrs {
	struct fg_buf raw;
	struct fg_hdr h[FG_MAX_HEADERS];
	uint32_t n;
	bool in_value;
	bool overflow;
};

void fg_hdrs_reset(struct fg_hdrs *h);
int fg_hdrs_on_field(struct fg_hdrs *h, const char *at, size_t len);
int fg_hdrs_on_value(struct fg_hdrs *h, const char *at, size_t len);
/* inline: the name is a literal, so its length folds to a constant and
 * most headers are told apart by length alone */
static inline bool fg_hdr_is(const struct fg_hdrs *h, uint32_t i, const char *name)
{
	size_t n = strlen(name);

	return h->h[i].name_len == n && !strncasecmp(h->raw.data + h->h[i].name, name, n);
}
const char *fg_hdr_value(const struct fg_hdrs *h, uint32_t i, size_t *len);
const char *fg_hdrs_get(const struct fg_hdrs *h, const char *name, size_t *len);
bool fg_hop_by_hop(const struct fg_hdrs *h, uint32_t i);
/* The client's credentials: Authorization, Proxy-Authorization, Cookie
 * (never forwarded to the engine). */
bool fg_hdr_credential(const struct fg_hdrs *h, uint32_t i);
/* A complete response head at the start of p[0, n) in its common form
 * (HTTP/1.1, status 200-599 with a body, one Content-Length, no framing or
 * connection headers, plain names and values) read into the empty h:
 * returns its length with *status and *content_length. 0 for any other
 * form (h left empty): http_parser reads it. */
size_t fg_resp_head_fast(const char *p, size_t n, struct fg_hdrs *h, int *status,
			 uint64_t *content_length);
/* The same for a request head: "POST" or "GET", an origin-form target of
 * plain characters, HTTP/1.1, plain headers without Connection, Expect or
 * Transfer-Encoding, at most one Content-Length (*content_length, or
 * UINT64_MAX), all within FG_REQ_HEAD_FAST_MAX bytes. The target goes
 * first into h->raw (*url, *url_len), as the parser callbacks put it. */
#define FG_REQ_HEAD_FAST_MAX (16u << 10)
size_t fg_req_head_fast(const char *p, size_t n, struct fg_hdrs *h, int *method,
			uint32_t *url, uint32_t *url_len, uint64_t *content_length);

#endif
