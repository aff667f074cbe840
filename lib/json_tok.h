/* json_tok.h — a streaming JSON tokenizer: RFC 8259 grammar, strict UTF-8
 * (no overlongs, surrogates or bytes past U+10FFFF), no NUL raw or as
 * \u0000, no lone surrogate escapes, whitespace only space, tab, CR, LF.
 *
 * The text is handed over as it grows (all of it so far each time; it may
 * move between calls) and each byte is read once: a token cut by a read
 * is carried on, not lexed again. String contents, where a request body's
 * bytes almost all are, are skipped 16 bytes at a time (quote, backslash,
 * control bytes and non-ASCII found together) with UTF-8 checked in the
 * same pass. It reports tokens by offsets into the text; it does not copy
 * or decode strings (fg_jt_unescape does, for the few whose text a reader
 * wants). Errors carry no message: a reader that must explain one runs a
 * parser that does (agent/http/http_request.c runs yajl). */
#ifndef FAIRGATE_JSON_TOK_H
#define FAIRGATE_JSON_TOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FG_JT_MAX_DEPTH 4096 /* deeper nesting is an error */

enum fg_jt_kind {
	FG_JT_NULL, FG_JT_TRUE, FG_JT_FALSE, FG_JT_NUMBER, FG_JT_STRING, FG_JT_KEY,
	FG_JT_START_MAP, FG_JT_END_MAP, FG_JT_START_ARRAY, FG_JT_END_ARRAY,
};

struct fg_jt_token {
	enum fg_jt_kind kind;
	size_t start, end;       /* [start, end) in the text; a string's quotes included */
	size_t decoded_len;      /* strings and keys: bytes once unescaped */
	bool escaped;            /* strings and keys: a backslash inside */
};

/* A token has been read; 0 stops the tokenizer (fg_jt_feed returns FG_JT_STOPPED). */
typedef int (*fg_jt_cb)(void *ctx, const char *text, const struct fg_jt_token *tok);

enum fg_jt_status { FG_JT_MORE = 0, FG_JT_DONE = 1, FG_JT_ERROR = -1, FG_JT_STOPPED = -2 };

struct fg_jt {
	size_t pos;              /* the next byte to read */
	size_t tok_start;        /* of the token in progress */
	size_t err_at;           /* FG_JT_ERROR: the offending byte */
	int64_t delta;           /* the string in progress: decoded minus raw bytes of its escapes */
	uint32_t depth;
	uint8_t expect, tok, sub, utf8_left, utf8_lo, utf8_hi, hex_left;
	bool escaped, failed;
	uint16_t uval;
	uint64_t stack[FG_JT_MAX_DEPTH / 64]; /* bit set: an object */
};

void fg_jt_init(struct fg_jt *j);

/* Read text[j->pos, len) (text: all of it so far); FG_JT_MORE when all of
 * it was read and more may follow (DONE only comes from fg_jt_finish). An
 * error or a stop is final. */
enum fg_jt_status fg_jt_feed(struct fg_jt *j, const char *text, size_t len, fg_jt_cb cb,
			     void *ctx);

/* The text ends at len: read what is left, then FG_JT_DONE when it was one
 * whole value with only whitespace after it. */
enum fg_jt_status fg_jt_finish(struct fg_jt *j, const char *text, size_t len, fg_jt_cb cb,
			       void *ctx);

/* The decoded bytes of a string token the tokenizer accepted (raw: the
 * bytes between its quotes), written to out (room for rawlen bytes:
 * decoding never lengthens); returns their count. */
size_t fg_jt_unescape(const char *raw, size_t rawlen, char *out);

/* A UTF-8 lead byte's rule (RFC 3629, no overlongs, no surrogates, nothing
 * past U+10FFFF): how many continuation bytes follow it, 0 when it is no
 * lead, and the range [*lo, *hi] the first of them must be in. */
static inline unsigned fg_utf8_lead(unsigned c, unsigned *lo, unsigned *hi)
{
	*lo = 0x80, *hi = 0xbf;
	if (c >= 0xc2 && c <= 0xdf)
		return 1;
	if (c >= 0xe0 && c <= 0xef) {
		*lo = c == 0xe0 ? 0xa0 : 0x80, *hi = c == 0xed ? 0x9f : 0xbf;
		return 2;
	}
	if (c >= 0xf0 && c <= 0xf4) {
		*lo = c == 0xf0 ? 0x90 : 0x80, *hi = c == 0xf4 ? 0x8f : 0xbf;
		return 3;
	}
	return 0;
}

#endif
