/* http_headers.c — header collection for libhttp-parser callbacks (which may
 * split a name or value across reads) and the hop-by-hop rule; see
 * proxy_internal.h. */
#include <string.h>
#include <strings.h>
#include "agent/proxy_internal.h"

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
bool fg_hop_by_hop(const struct fg_hdrs *h, uint32_t i)
{
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
