/* json_tok.c — the streaming JSON tokenizer of json_tok.h.
 *
 * Hand-written, which the house rules allow only where no library does
 * the job: no Debian JSON library streams at this speed. yajl lexes a
 * string a byte at a time through its state table and leaves strict UTF-8
 * to a second pass (together 97% of a large body's cost in the agent);
 * jansson and json-c build trees. Here a string's plain bytes go 16 at a
 * time (SSE2; 8 at a time elsewhere) and UTF-8 is checked where the
 * scan stops for a non-ASCII byte, so a prompt costs about a copy. The
 * grammar is a small state machine whose state survives between reads. */
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "lib/json_tok.h"

/* what comes next, outside a token */
enum { E_VALUE, E_VALUE_OR_CLOSE, E_KEY, E_KEY_OR_CLOSE, E_COLON, E_COMMA_OR_CLOSE, E_END };
/* the token in progress */
enum { T_NONE, T_STRING, T_KEY, T_NUMBER, T_TRUE, T_FALSE, T_NULL };
/* inside a string */
enum { S_PLAIN, S_UTF8, S_ESC, S_HEX, S_LO_BACKSLASH, S_LO_U, S_LO_HEX };
/* inside a number: where its grammar is */
enum { N_MINUS, N_ZERO, N_INT, N_DOT, N_FRAC, N_EXP, N_EXP_SIGN, N_EXP_DIGITS };

void fg_jt_init(struct fg_jt *j)
{
	memset(j, 0, offsetof(struct fg_jt, stack));
	j->expect = E_VALUE;
}

static inline bool is_ws(unsigned c)
{
	return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

static inline int hex_val(unsigned c)
{
	if (c >= '0' && c <= '9')
		return (int)(c - '0');
	c |= 0x20;
	if (c >= 'a' && c <= 'f')
		return (int)(c - 'a' + 10);
	return -1;
}

/* The first offset at or after i whose byte a string cannot pass over as
 * it is: '"', '\\', a control byte or a non-ASCII byte; len if none. */
static inline size_t skip_plain(const unsigned char *s, size_t i, size_t len)
{
#ifdef __SSE2__
	const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\');
	const __m128i ctl = _mm_set1_epi8(0x1f);
	while (i + 32 <= len) {
		__m128i a = _mm_loadu_si128((const __m128i *)(s + i));
		__m128i b = _mm_loadu_si128((const __m128i *)(s + i + 16));
		/* a byte <= 0x1f unsigned is one whose min with 0x1f is itself;
		 * a non-ASCII byte has its top bit set, which movemask reads */
		__m128i sa = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(a, quote),
							_mm_cmpeq_epi8(a, bslash)),
					  _mm_or_si128(_mm_cmpeq_epi8(_mm_min_epu8(a, ctl), a), a));
		__m128i sb = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(b, quote),
							_mm_cmpeq_epi8(b, bslash)),
					  _mm_or_si128(_mm_cmpeq_epi8(_mm_min_epu8(b, ctl), b), b));
		unsigned m = (unsigned)_mm_movemask_epi8(sa) | (unsigned)_mm_movemask_epi8(sb) << 16;
		if (m)
			return i + (size_t)__builtin_ctz(m);
		i += 32;
	}
	while (i + 16 <= len) {
		__m128i a = _mm_loadu_si128((const __m128i *)(s + i));
		__m128i sa = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(a, quote),
							_mm_cmpeq_epi8(a, bslash)),
					  _mm_or_si128(_mm_cmpeq_epi8(_mm_min_epu8(a, ctl), a), a));
		unsigned m = (unsigned)_mm_movemask_epi8(sa);
		if (m)
			return i + (size_t)__builtin_ctz(m);
		i += 16;
	}
#else
	const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
	while (i + 8 <= len) {
		uint64_t w, q, b;
		memcpy(&w, s + i, 8);
		q = w ^ (ones * '"');
		b = w ^ (ones * '\\');
		/* a zero byte in q or b, a byte < 0x20, or a top bit */
		uint64_t hit = ((q - ones) & ~q) | ((b - ones) & ~b) | ((w - ones * 0x20) & ~w) | w;
		if (hit & high) /* maybe: the exact byte, if any, is found one by one */
			for (size_t k = i; k < i + 8; k++)
				if (s[k] == '"' || s[k] == '\\' || s[k] < 0x20 || s[k] >= 0x80)
					return k;
		i += 8;
	}
#endif
	while (i < len) {
		unsigned c = s[i];
		if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80)
			return i;
		i++;
	}
	return len;
}

/* Non-ASCII text (a CJK prompt is mostly three-byte characters): from the
 * lead byte at i, characters one at a time, checked as strict UTF-8, until
 * a byte the string must stop at ('"', '\\', a control byte), a run of
 * plain ASCII long enough for the wide scan again, or a character the
 * bytes so far cut. *bad: the offending byte, or SIZE_MAX. */
static size_t utf8_run(const unsigned char *s, size_t i, size_t len, size_t *bad)
{
	unsigned ascii = 0;

	*bad = SIZE_MAX;
	while (i < len) {
		unsigned c = s[i];
		if (c < 0x80) {
			if (c == '"' || c == '\\' || c < 0x20)
				return i;
			i++;
			if (++ascii >= 8)
				return i;
			continue;
		}
		ascii = 0;
		/* most of such text: three bytes, a lead of E1-EC or EE-EF */
		if (((c >= 0xe1 && c <= 0xec) || c >= 0xee) && c <= 0xef && i + 2 < len &&
		    (s[i + 1] & 0xc0) == 0x80 && (s[i + 2] & 0xc0) == 0x80) {
			i += 3;
			continue;
		}
		unsigned lo = 0x80, hi = 0xbf, n;
		if (c >= 0xe0 && c <= 0xef)
			n = 2, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
		else if (c >= 0xc2 && c <= 0xdf)
			n = 1;
		else if (c >= 0xf0 && c <= 0xf4)
			n = 3, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
		else {
			*bad = i;
			return i;
		}
		if (i + n >= len)
			return i; /* cut: the caller carries it */
		if (s[i + 1] < lo || s[i + 1] > hi) {
			*bad = i + 1;
			return i;
		}
		for (unsigned k = 2; k <= n; k++)
			if ((s[i + k] & 0xc0) != 0x80) {
				*bad = i + k;
				return i;
			}
		i += n + 1;
	}
	return i;
}

static inline bool in_object(const struct fg_jt *j)
{
	uint32_t d = j->depth - 1;
	return j->stack[d / 64] >> (d % 64) & 1;
}

#define FAIL(at)                          \
	do {                              \
		j->err_at = (at);         \
		j->failed = true;         \
		j->pos = (at);            \
		return FG_JT_ERROR;       \
	} while (0)

#define EMIT(k, from, to, dec, esc)                                                     \
	do {                                                                            \
		struct fg_jt_token t_ = { (k), (from), (to), (dec), (esc) };            \
		if (!cb(ctx, text, &t_)) {                                              \
			j->failed = true;                                               \
			j->pos = (to);                                                  \
			return FG_JT_STOPPED;                                           \
		}                                                                       \
	} while (0)

/* The bytes of a literal after its first. */
static const char *const literal_rest[] = { [T_TRUE] = "rue", [T_FALSE] = "alse", [T_NULL] = "ull" };
static const uint8_t literal_len[] = { [T_TRUE] = 4, [T_FALSE] = 5, [T_NULL] = 4 };

static enum fg_jt_status run(struct fg_jt *j, const char *text, size_t len, bool last, fg_jt_cb cb,
			     void *ctx)
{
	const unsigned char *s = (const unsigned char *)text;
	size_t i = j->pos;

	if (j->failed)
		return FG_JT_ERROR;
	switch (j->tok) {
	case T_STRING:
	case T_KEY:
		goto in_string;
	case T_NUMBER:
		goto in_number;
	case T_TRUE:
	case T_FALSE:
	case T_NULL:
		goto in_literal;
	default:
		break;
	}
	for (;;) {
		while (i < len && is_ws(s[i]))
			i++;
		if (i >= len) {
			j->pos = i;
			return FG_JT_MORE;
		}
		unsigned c = s[i];
		switch (j->expect) {
		case E_END:
			FAIL(i);
		case E_COLON:
			if (c != ':')
				FAIL(i);
			i++;
			j->expect = E_VALUE;
			continue;
		case E_COMMA_OR_CLOSE:
			if (c == ',') {
				i++;
				j->expect = in_object(j) ? E_KEY : E_VALUE;
				continue;
			}
			if (c != (in_object(j) ? '}' : ']'))
				FAIL(i);
			goto close;
		case E_KEY_OR_CLOSE:
			if (c == '}')
				goto close;
			/* fall through */
		case E_KEY:
			if (c != '"')
				FAIL(i);
			j->tok = T_KEY;
			goto string_start;
		case E_VALUE_OR_CLOSE:
			if (c == ']')
				goto close;
			/* fall through */
		case E_VALUE:
			break;
		}
		/* a value starts at i */
		if (c == '{' || c == '[') {
			if (j->depth >= FG_JT_MAX_DEPTH)
				FAIL(i);
			EMIT(c == '{' ? FG_JT_START_MAP : FG_JT_START_ARRAY, i, i + 1, 0, false);
			uint32_t d = j->depth++;
			if (c == '{')
				j->stack[d / 64] |= 1ull << (d % 64);
			else
				j->stack[d / 64] &= ~(1ull << (d % 64));
			j->expect = c == '{' ? E_KEY_OR_CLOSE : E_VALUE_OR_CLOSE;
			i++;
			continue;
		}
		if (c == '"') {
			j->tok = T_STRING;
			goto string_start;
		}
		if (c == '-' || (c >= '0' && c <= '9')) {
			j->tok = T_NUMBER;
			j->tok_start = i;
			j->sub = c == '-' ? N_MINUS : c == '0' ? N_ZERO : N_INT;
			i++;
			goto in_number;
		}
		if (c == 't' || c == 'f' || c == 'n') {
			j->tok = c == 't' ? T_TRUE : c == 'f' ? T_FALSE : T_NULL;
			j->tok_start = i;
			i++;
			goto in_literal;
		}
		FAIL(i);

	close: {
		bool obj = c == '}';
		EMIT(obj ? FG_JT_END_MAP : FG_JT_END_ARRAY, i, i + 1, 0, false);
		j->depth--;
		i++;
		j->expect = j->depth ? E_COMMA_OR_CLOSE : E_END;
		continue;
	}

	string_start:
		j->tok_start = i;
		j->delta = 0;
		j->escaped = false;
		j->sub = S_PLAIN;
		i++;
	in_string:
		for (;;) {
			if (j->sub == S_PLAIN) {
				i = skip_plain(s, i, len);
				if (i >= len)
					goto more;
				c = s[i];
				if (c == '"')
					break;
				if (c == '\\') {
					j->escaped = true;
					/* the common escapes whole here: at once */
					unsigned e = i + 1 < len ? s[i + 1] : 0;
					if (e == 'n' || e == '"' || e == '\\' || e == 't' || e == 'r' ||
					    e == '/' || e == 'b' || e == 'f') {
						j->delta -= 1;
						i += 2;
						continue;
					}
					if (e == 'u' && i + 6 <= len) {
						int h0 = hex_val(s[i + 2]), h1 = hex_val(s[i + 3]);
						int h2 = hex_val(s[i + 4]), h3 = hex_val(s[i + 5]);
						unsigned cp = (h0 | h1 | h2 | h3) < 0 ? 0 :
							      (unsigned)(h0 << 12 | h1 << 8 | h2 << 4 | h3);
						if (cp && (cp < 0xd800 || cp > 0xdfff)) {
							j->delta += (cp < 0x80 ? 1 : cp < 0x800 ? 2 : 3) - 6;
							i += 6;
							continue;
						}
					}
					j->sub = S_ESC; /* the rest byte by byte */
					i++;
					continue;
				}
				if (c < 0x80)
					FAIL(i); /* a control byte */
				size_t bad, k = utf8_run(s, i, len, &bad);
				if (bad != SIZE_MAX)
					FAIL(bad);
				if (k > i) {
					i = k;
					continue;
				}
				/* a UTF-8 lead byte: its length and the range of its second byte */
				unsigned lo, hi, n = fg_utf8_lead(c, &lo, &hi);
				if (!n)
					FAIL(i);
				if (i + n < len) { /* whole here: checked at once */
					if (s[i + 1] < lo || s[i + 1] > hi)
						FAIL(i + 1);
					for (unsigned k = 2; k <= n; k++)
						if ((s[i + k] & 0xc0) != 0x80)
							FAIL(i + k);
					i += n + 1;
					continue;
				}
				j->sub = S_UTF8;
				j->utf8_left = (uint8_t)n;
				j->utf8_lo = (uint8_t)lo;
				j->utf8_hi = (uint8_t)hi;
				i++;
				continue;
			}
			if (i >= len)
				goto more;
			c = s[i];
			switch (j->sub) {
			case S_UTF8:
				if (c < j->utf8_lo || c > j->utf8_hi)
					FAIL(i);
				j->utf8_lo = 0x80, j->utf8_hi = 0xbf;
				if (!--j->utf8_left)
					j->sub = S_PLAIN;
				i++;
				continue;
			case S_ESC:
				if (c == 'u') {
					j->sub = S_HEX;
					j->hex_left = 4;
					j->uval = 0;
				} else if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' ||
					   c == 'n' || c == 'r' || c == 't') {
					j->delta -= 1; /* two bytes for one */
					j->sub = S_PLAIN;
				} else {
					FAIL(i);
				}
				i++;
				continue;
			case S_HEX:
			case S_LO_HEX: {
				int h = hex_val(c);
				if (h < 0)
					FAIL(i);
				j->uval = (uint16_t)(j->uval << 4 | (unsigned)h);
				i++;
				if (--j->hex_left)
					continue;
				unsigned cp = j->uval;
				if (j->sub == S_LO_HEX) {
					if (cp < 0xdc00 || cp > 0xdfff)
						FAIL(i - 1);
					j->delta += 4 - 12; /* a pair: four bytes of UTF-8 */
					j->sub = S_PLAIN;
				} else if (cp == 0 || (cp >= 0xdc00 && cp <= 0xdfff)) {
					FAIL(i - 1); /* NUL, a lone low surrogate */
				} else if (cp >= 0xd800 && cp <= 0xdbff) {
					j->sub = S_LO_BACKSLASH; /* its low half must follow */
				} else {
					j->delta += (cp < 0x80 ? 1 : cp < 0x800 ? 2 : 3) - 6;
					j->sub = S_PLAIN;
				}
				continue;
			}
			case S_LO_BACKSLASH:
				if (c != '\\')
					FAIL(i);
				j->sub = S_LO_U;
				i++;
				continue;
			case S_LO_U:
				if (c != 'u')
					FAIL(i);
				j->sub = S_LO_HEX;
				j->hex_left = 4;
				j->uval = 0;
				i++;
				continue;
			}
		}
		/* the closing quote is at i */
		i++;
		{
			size_t raw = i - j->tok_start - 2;
			bool key = j->tok == T_KEY;
			j->tok = T_NONE;
			EMIT(key ? FG_JT_KEY : FG_JT_STRING, j->tok_start, i,
			     (size_t)((int64_t)raw + j->delta), j->escaped);
			j->expect = key ? E_COLON : j->depth ? E_COMMA_OR_CLOSE : E_END;
		}
		continue;

	in_number:
		for (;; i++) {
			if (i >= len) {
				if (!last)
					goto more;
				break;
			}
			c = s[i];
			bool digit = c >= '0' && c <= '9';
			switch (j->sub) {
			case N_MINUS:
				if (!digit)
					FAIL(i);
				j->sub = c == '0' ? N_ZERO : N_INT;
				continue;
			case N_ZERO:
			case N_INT:
				if (digit && j->sub == N_INT)
					continue;
				if (c == '.') {
					j->sub = N_DOT;
					continue;
				}
				if (c == 'e' || c == 'E') {
					j->sub = N_EXP;
					continue;
				}
				break;
			case N_DOT:
				if (!digit)
					FAIL(i);
				j->sub = N_FRAC;
				continue;
			case N_FRAC:
				if (digit)
					continue;
				if (c == 'e' || c == 'E') {
					j->sub = N_EXP;
					continue;
				}
				break;
			case N_EXP:
				if (c == '+' || c == '-') {
					j->sub = N_EXP_SIGN;
					continue;
				}
				/* fall through */
			case N_EXP_SIGN:
				if (!digit)
					FAIL(i);
				j->sub = N_EXP_DIGITS;
				continue;
			case N_EXP_DIGITS:
				if (digit)
					continue;
				break;
			}
			break;
		}
		/* the number ends before i: only in a state that may end it */
		if (j->sub != N_ZERO && j->sub != N_INT && j->sub != N_FRAC && j->sub != N_EXP_DIGITS)
			FAIL(i);
		j->tok = T_NONE;
		EMIT(FG_JT_NUMBER, j->tok_start, i, 0, false);
		j->expect = j->depth ? E_COMMA_OR_CLOSE : E_END;
		continue;

	in_literal: {
		size_t n = literal_len[j->tok], at = i - j->tok_start;
		const char *rest = literal_rest[j->tok];
		while (at < n) {
			if (i >= len)
				goto more;
			if (s[i] != (unsigned char)rest[at - 1])
				FAIL(i);
			i++, at++;
		}
		enum fg_jt_kind k = j->tok == T_TRUE ? FG_JT_TRUE
				    : j->tok == T_FALSE ? FG_JT_FALSE : FG_JT_NULL;
		j->tok = T_NONE;
		EMIT(k, j->tok_start, i, 0, false);
		j->expect = j->depth ? E_COMMA_OR_CLOSE : E_END;
		continue;
	}
	}
more:
	j->pos = i;
	return FG_JT_MORE;
}

enum fg_jt_status fg_jt_feed(struct fg_jt *j, const char *text, size_t len, fg_jt_cb cb,
			     void *ctx)
{
	return run(j, text, len, false, cb, ctx);
}

enum fg_jt_status fg_jt_finish(struct fg_jt *j, const char *text, size_t len, fg_jt_cb cb,
			       void *ctx)
{
	enum fg_jt_status st = run(j, text, len, true, cb, ctx);

	if (st != FG_JT_MORE)
		return st;
	if (j->tok != T_NONE || j->expect != E_END) {
		j->err_at = len;
		j->failed = true;
		return FG_JT_ERROR; /* the text ends inside a token or a value */
	}
	return FG_JT_DONE;
}

static void put_utf8(char *out, size_t *o, unsigned cp)
{
	if (cp < 0x80) {
		out[(*o)++] = (char)cp;
	} else if (cp < 0x800) {
		out[(*o)++] = (char)(0xc0 | cp >> 6);
		out[(*o)++] = (char)(0x80 | (cp & 0x3f));
	} else if (cp < 0x10000) {
		out[(*o)++] = (char)(0xe0 | cp >> 12);
		out[(*o)++] = (char)(0x80 | (cp >> 6 & 0x3f));
		out[(*o)++] = (char)(0x80 | (cp & 0x3f));
	} else {
		out[(*o)++] = (char)(0xf0 | cp >> 18);
		out[(*o)++] = (char)(0x80 | (cp >> 12 & 0x3f));
		out[(*o)++] = (char)(0x80 | (cp >> 6 & 0x3f));
		out[(*o)++] = (char)(0x80 | (cp & 0x3f));
	}
}

static unsigned hex4(const char *p)
{
	unsigned v = 0;

	for (int k = 0; k < 4; k++)
		v = v << 4 | (unsigned)hex_val((unsigned char)p[k]);
	return v;
}

size_t fg_jt_unescape(const char *raw, size_t rawlen, char *out)
{
	size_t o = 0, i = 0;

	while (i < rawlen) {
		const char *bs = memchr(raw + i, '\\', rawlen - i);
		size_t plain = bs ? (size_t)(bs - raw) - i : rawlen - i;
		memmove(out + o, raw + i, plain);
		o += plain;
		i += plain;
		if (!bs)
			break;
		char e = raw[i + 1];
		i += 2;
		switch (e) {
		case 'b': out[o++] = '\b'; break;
		case 'f': out[o++] = '\f'; break;
		case 'n': out[o++] = '\n'; break;
		case 'r': out[o++] = '\r'; break;
		case 't': out[o++] = '\t'; break;
		case 'u': {
			unsigned cp = hex4(raw + i);
			i += 4;
			if (cp >= 0xd800 && cp <= 0xdbff) { /* the tokenizer saw its low half */
				unsigned lo = hex4(raw + i + 2);
				i += 6;
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			}
			put_utf8(out, &o, cp);
			break;
		}
		default: out[o++] = e; break; /* '"', '\\', '/' */
		}
	}
	return o;
}
