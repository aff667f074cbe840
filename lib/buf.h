/* buf.h — a growable byte buffer with a read offset, for socket I/O.
 *
 * Data lives in [off, len). Appends grow the block; consumes advance off and
 * reset both to 0 when the buffer empties, so a connection that keeps
 * draining its buffer never grows it. */
#ifndef FAIRGATE_BUF_H
#define FAIRGATE_BUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define FG_BUF_MIN_CAP 256 /* a buffer's first block, at least */

struct fg_buf {
	char *data;
	size_t off, len, cap;
};

static inline size_t fg_buf_used(const struct fg_buf *b) { return b->len - b->off; }
/* An empty buffer may have no block: NULL + 0 is undefined in C. */
static inline char *fg_buf_head(const struct fg_buf *b) { return b->data ? b->data + b->off : NULL; }

/* Make room for `more` bytes after len; 0 or -1 (out of memory). */
int fg_buf_reserve(struct fg_buf *b, size_t more);
static inline int fg_buf_append(struct fg_buf *b, const void *p, size_t n)
{
	if (b->cap - b->len < n && fg_buf_reserve(b, n))
		return -1;
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	return 0;
}
int fg_buf_printf(struct fg_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* v in base 10 or 16 (lowercase), without printf's cost on the request path */
int fg_buf_append_uint(struct fg_buf *b, uint64_t v, unsigned base);
/* a string literal or other C string */
static inline int fg_buf_append_str(struct fg_buf *b, const char *s)
{
	return fg_buf_append(b, s, strlen(s));
}
void fg_buf_consume(struct fg_buf *b, size_t n);
void fg_buf_reset(struct fg_buf *b);
void fg_buf_free(struct fg_buf *b);

#endif
