/* buf.c — growable byte buffer; see buf.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/buf.h"

int fg_buf_reserve(struct fg_buf *b, size_t more)
{
	if (b->cap - b->len >= more)
		return 0;
	if (b->off && b->cap - fg_buf_used(b) >= more) {
		/* compact rather than grow when the head has been consumed */
		memmove(b->data, b->data + b->off, fg_buf_used(b));
		b->len -= b->off;
		b->off = 0;
		return 0;
	}
	/* a first block the size of what arrives (a connection's buffers are
	 * freed between requests, so they start small again), then doubling */
	size_t need = b->len + more, cap = b->cap ? b->cap : FG_BUF_MIN_CAP;
	while (cap < need)
		cap *= 2;
	char *n = realloc(b->data, cap);
	if (!n)
		return -1;
	b->data = n;
	b->cap = cap;
	return 0;
}

int fg_buf_printf(struct fg_buf *b, const char *fmt, ...)
{
	va_list ap;
	size_t room = b->cap - b->len;
	int n;

	/* one pass when it fits (the usual case), a second after growing */
	va_start(ap, fmt);
	n = vsnprintf(room ? b->data + b->len : NULL, room, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -1;
	if ((size_t)n >= room) {
		if (fg_buf_reserve(b, (size_t)n + 1))
			return -1;
		va_start(ap, fmt);
		vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
		va_end(ap);
	}
	b->len += (size_t)n;
	return 0;
}

int fg_buf_append_uint(struct fg_buf *b, uint64_t v, unsigned base)
{
	static const char digits[] = "0123456789abcdef";
	char tmp[24], *p = tmp + sizeof(tmp);

	do {
		*--p = digits[v % base];
		v /= base;
	} while (v);
	return fg_buf_append(b, p, (size_t)(tmp + sizeof(tmp) - p));
}

void fg_buf_consume(struct fg_buf *b, size_t n)
{
	b->off += n;
	if (b->off >= b->len)
		b->off = b->len = 0;
}

void fg_buf_reset(struct fg_buf *b)
{
	b->off = b->len = 0;
}

void fg_buf_free(struct fg_buf *b)
{
	free(b->data);
	memset(b, 0, sizeof(*b));
}
