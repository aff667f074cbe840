/* http_headers.c — header collection for libhttp-parser callbacks (which may
 * split a name or value across reads), the hop-by-hop rule, and strict
 * readers for the common request and engine response heads; see
 * http_headers.h. */
#include <stdint.h>
#include <http_parser.h>
#include <string.h>
#include <strings.h>
#include "agent/http/http_headers.h"

void fg_hdrs_reset(struct fg_hdrs *h)
{
	fg_buf_reset(&h->raw);
	h->n = 0;
	h->in_value = false;
	h->overflow = false;
}

int fg_hdrs_on_field(struct fg_hdrs *h, const char *at, size_t len)
{
	if (h->in_value || !h->n) {
		if (h->n == FG_MAX_HEADERS) {
			h->overflow = true;
			return -1;
		}
		struct fg_hdr *e = &h->h[h->n++];
		memset(e, 0, sizeof(*e));
		e->name = (uint32_t)h->raw.len;
		h->in_value = false;
	}
	h->h[h->n - 1].name_len += (uint32_t)len;
	return fg_buf_append(&h->raw, at, len);
}

int fg_hdrs_on_value(struct fg_hdrs *h, const char *at, size_t len)
{
	if (!h->n)
		return -1;
	struct fg_hdr *e = &h->h[h->n - 1];
	if (!h->in_value) {
		h->in_value = true;
		e->value = (uint32_t)h->raw.len;
	}
	e->value_len += (uint32_t)len;
	return fg_buf_append(&h->raw, at, len);
}

const char *fg_hdr_value(const struct fg_hdrs *h, uint32_t i, size_t *len)
{
	*len = h->h[i].value_len;
	return h->raw.data + h->h[i].value;
}

const char *fg_hdrs_get(const struct fg_hdrs *h, const char *name, size_t *len)
{
	size_t n = strlen(name);

	for (uint32_t i = 0; i < h->n; i++)
		if (h->h[i].name_len == n && !strncasecmp(h->raw.data + h->h[i].name, name, n))
			return fg_hdr_value(h, i, len);
	return NULL;
}

/* RFC 9110 7.6.1: connection-specific fields are not forwarded. Content-
 * Length and Expect are also dropped: the proxy frames each hop itself.
 * Every header of every request and response passes here: the length
 * picks the one or two names worth comparing. */
bool fg_hdr_credential(const struct fg_hdrs *h, uint32_t i)
{
	return fg_hdr_is(h, i, "authorization") || fg_hdr_is(h, i, "cookie") ||
	       fg_hdr_is(h, i, "proxy-authorization");
}

bool fg_hop_by_hop(const struct fg_hdrs *h, uint32_t i)
{
	/* every name below starts with one of these: x-... and most others
	 * are told apart without a compare */
	switch (h->h[i].name_len ? h->raw.data[h->h[i].name] | 0x20 : 0) {
	case 'c': case 'e': case 'k': case 'p': case 't': case 'u':
		break;
	default:
		return false;
	}
	switch (h->h[i].name_len) {
	case 2:
		return fg_hdr_is(h, i, "te");
	case 6:
		return fg_hdr_is(h, i, "expect");
	case 7:
		return fg_hdr_is(h, i, "trailer") || fg_hdr_is(h, i, "upgrade");
	case 10:
		return fg_hdr_is(h, i, "connection") || fg_hdr_is(h, i, "keep-alive");
	case 14:
		return fg_hdr_is(h, i, "content-length");
	case 16:
		return fg_hdr_is(h, i, "proxy-connection");
	case 17:
		return fg_hdr_is(h, i, "transfer-encoding");
	case 18:
		return fg_hdr_is(h, i, "proxy-authenticate");
	case 19:
		return fg_hdr_is(h, i, "proxy-authorization");
	default:
		return false;
	}
}

/* RFC 9110 5.6.2 tchar */
static const bool tchar[256] = {
	['!'] = 1, ['#'] = 1, ['$'] = 1, ['%'] = 1, ['&'] = 1, ['\''] = 1, ['*'] = 1, ['+'] = 1,
	['-'] = 1, ['.'] = 1, ['^'] = 1, ['_'] = 1, ['`'] = 1, ['|'] = 1, ['~'] = 1,
	['0' ... '9'] = 1, ['A' ... 'Z'] = 1, ['a' ... 'z'] = 1,
};
/* what http_parser takes in a value, less CR and LF (which end it) */
static const bool vchar[256] = { ['\t'] = 1, [0x20 ... 0x7e] = 1, [0x80 ... 0xff] = 1 };

/* http_parser 2.9 reads a name that only starts with the name of a framing
 * or connection header as that header (fuzz_http_heads found
 * "transfer-encodingx-", which it then refused next to a Content-Length):
 * such names are left to it, so the fast readers are never laxer. */
static bool framing_name_prefix(const char *name, size_t nl)
{
	static const char *const words[] = { "connection", "content-length", "proxy-connection",
					     "transfer-encoding", "upgrade" };

	switch (*name | 0x20) {
	case 'c': case 'p': case 't': case 'u':
		break;
	default:
		return false;
	}
	for (size_t w = 0; w < sizeof(words) / sizeof(words[0]); w++) {
		size_t wl = strlen(words[w]);

		if (nl > wl && !strncasecmp(name, words[w], wl))
			return true;
	}
	return false;
}

/* The header lines from q to the blank line, into the empty-of-them h:
 * returns the end of the head (past the blank line), or NULL when a line is
 * not in the plain form (h then holds whatever was added: the caller
 * resets it). *content_length: the one Content-Length, or UINT64_MAX. */
static const char *plain_header_lines(const char *q, const char *e, struct fg_hdrs *h,
				      uint64_t *content_length)
{
	const char *cr;
	bool have_len = false;
	uint64_t len = 0;

	for (;; q = cr + 2) {
		if (e - q < 2)
			return NULL; /* the head goes on past this read */
		if (q[0] == '\r' && q[1] == '\n')
			break; /* the blank line */
		const char *name = q;
		while (q < e && tchar[(unsigned char)*q])
			q++;
		if (q == name || q == e || *q != ':')
			return NULL;
		size_t nl = (size_t)(q - name);
		if (framing_name_prefix(name, nl))
			return NULL;
		for (q++; q < e && (*q == ' ' || *q == '\t'); q++)
			;
		const char *v = q;
		if (!(cr = memchr(q, '\r', (size_t)(e - q))) || e - cr < 2 || cr[1] != '\n')
			return NULL;
		/* eight bytes at a time while none is below 0x20 or 0x7f (exact:
		 * a borrow only ever follows a byte that is flagged anyway) */
		for (uint64_t w; cr - q >= 8; q += 8) {
			memcpy(&w, q, 8);
			uint64_t del = w ^ 0x7f7f7f7f7f7f7f7full;
			if (((w - 0x2020202020202020ull) & ~w & 0x8080808080808080ull) ||
			    ((del - 0x0101010101010101ull) & ~del & 0x8080808080808080ull))
				break;
		}
		for (; q < cr; q++)
			if (!vchar[(unsigned char)*q])
				return NULL;
		size_t vl = (size_t)(cr - v);
		if (!vl || v[vl - 1] == ' ' || v[vl - 1] == '\t')
			return NULL; /* an empty value, trailing blanks: http_parser decides */
		if (fg_hdrs_on_field(h, name, nl) || fg_hdrs_on_value(h, v, vl))
			return NULL;
		uint32_t i = h->n - 1;
		if (fg_hdr_is(h, i, "content-length")) {
			if (have_len || vl > 18)
				return NULL;
			for (size_t k = 0; k < vl; k++) {
				if (v[k] < '0' || v[k] > '9')
					return NULL;
				len = len * 10 + (uint64_t)(v[k] - '0');
			}
			have_len = true;
		} else if (fg_hop_by_hop(h, i)) {
			return NULL; /* Connection, Transfer-Encoding, Expect...: http_parser's */
		}
	}
	*content_length = have_len ? len : UINT64_MAX;
	return q + 2;
}

/* http_parser reads a response head a byte at a time through a state
 * machine: for the engine's ~330-byte heads that was the largest cost on
 * the request path. The common head is read here a line at a time
 * (memchr for its end, a table for its bytes) and handed over exactly as
 * http_parser's callbacks would have collected it; anything this reader
 * does not fully understand is left to http_parser (return 0, h
 * unchanged), so it is never laxer than it. */
size_t fg_resp_head_fast(const char *p, size_t n, struct fg_hdrs *h, int *status,
			 uint64_t *content_length)
{
	const char *e = p + n, *q = p + 9, *cr, *end;

	if (n < 16 || h->n || memcmp(p, "HTTP/1.1 ", 9))
		return 0;
	if (q[0] < '0' || q[0] > '9' || q[1] < '0' || q[1] > '9' || q[2] < '0' || q[2] > '9' ||
	    q[3] != ' ')
		return 0;
	int st = (q[0] - '0') * 100 + (q[1] - '0') * 10 + (q[2] - '0');
	if (st < 200 || st > 599 || st == 204 || st == 304)
		return 0; /* informational or bodiless: http_parser's rules */
	q += 4;
	if (!(cr = memchr(q, '\r', (size_t)(e - q))) || e - cr < 2 || cr[1] != '\n')
		return 0;
	for (; q < cr; q++) /* the reason phrase */
		if (!vchar[(unsigned char)*q])
			return 0;
	if (!(end = plain_header_lines(cr + 2, e, h, content_length)) ||
	    *content_length == UINT64_MAX) { /* chunked or until close: http_parser's */
		fg_hdrs_reset(h);
		return 0;
	}
	*status = st;
	return (size_t)(end - p);
}

/* what a request target may hold here: origin-form, the characters
 * http_parser takes in a path and query without special meaning */
static const bool url_char[256] = {
	['0' ... '9'] = 1, ['A' ... 'Z'] = 1, ['a' ... 'z'] = 1,
	['-'] = 1, ['.'] = 1, ['_'] = 1, ['~'] = 1, ['/'] = 1, ['?'] = 1, ['='] = 1, ['&'] = 1,
	['%'] = 1, ['+'] = 1, [','] = 1, [';'] = 1, [':'] = 1, ['@'] = 1, ['!'] = 1, ['$'] = 1,
	['*'] = 1, ['\''] = 1, ['('] = 1, [')'] = 1,
};

size_t fg_req_head_fast(const char *p, size_t n, struct fg_hdrs *h, int *method,
			uint32_t *url, uint32_t *url_len, uint64_t *content_length)
{
	const char *e = p + (n < FG_REQ_HEAD_FAST_MAX ? n : FG_REQ_HEAD_FAST_MAX), *q, *end;

	if (h->n || h->raw.len)
		return 0;
	if (e - p > 5 && !memcmp(p, "POST ", 5))
		*method = HTTP_POST, q = p + 5;
	else if (e - p > 4 && !memcmp(p, "GET ", 4))
		*method = HTTP_GET, q = p + 4;
	else
		return 0;
	const char *target = q;
	if (q == e || *q != '/')
		return 0;
	while (q < e && url_char[(unsigned char)*q])
		q++;
	if (e - q < 11 || memcmp(q, " HTTP/1.1\r\n", 11))
		return 0;
	*url = 0;
	*url_len = (uint32_t)(q - target);
	if (fg_buf_append(&h->raw, target, *url_len))
		return 0;
	if (!(end = plain_header_lines(q + 11, e, h, content_length))) {
		fg_hdrs_reset(h);
		return 0;
	}
	return (size_t)(end - p);
}
