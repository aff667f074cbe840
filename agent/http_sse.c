/* http_sse.c — event-by-event SSE relay with usage extraction; see
 * http_sse.h. */
#include <jansson.h>
#include <stdalign.h>
#include <stddef.h>
#include <string.h>
#include <yajl/yajl_parse.h>
#include "agent/http_sse.h"
#include "agent/json_number.h"
#include "agent/yajl_arena.h"

void fg_sse_init(struct fg_sse *s, bool hide_usage_chunk)
{
	memset(s, 0, sizeof(*s));
	s->hide_usage_chunk = hide_usage_chunk;
}

void fg_sse_free(struct fg_sse *s)
{
	fg_buf_free(&s->pending);
}

/* A token count no context comes near: beyond it (or negative) the engine's
 * usage is broken, and the agent bills from its own estimate instead of
 * turning it into a price (or an out-of-range integer conversion). */
#define USAGE_TOKENS_MAX 1e9

/* false when present but not a count; absent or not a number reads as 0 */
static bool num(const json_t *o, const char *key, double *out)
{
	const json_t *v = json_object_get(o, key);

	*out = json_is_number(v) ? json_number_value(v) : 0;
	return *out >= 0 && *out <= USAGE_TOKENS_MAX;
}

bool fg_usage_from_json(const json_t *obj, struct fg_usage *u)
{
	const json_t *usage = json_object_get(obj, "usage");

	if (!json_is_object(usage))
		return false;
	return num(usage, "prompt_tokens", &u->prompt_tokens) &&
	       num(usage, "completion_tokens", &u->completion_tokens) &&
	       num(json_object_get(usage, "prompt_tokens_details"), "cached_tokens",
		   &u->cached_tokens);
}

/* ---- a usage object, streamed (every non-stream answer is settled on one) ----
 *
 * jansson builds a tree one character at a time: for the ~100 bytes of a
 * usage object that was the request path's largest cost. yajl reads the same
 * object with no tree, and this reader applies fg_usage_from_json's rules
 * (numbers count, anything else reads 0, the last duplicate key wins).
 * Where yajl is laxer than jansson (escapes: \u0000, lone surrogates; \v
 * and \f as blanks; overlong UTF-8; integers beyond 64 bits; very deep
 * nesting) it does not guess: it answers "not sure" and the caller parses
 * with jansson. */

enum usage_key { UK_OTHER, UK_PROMPT, UK_COMPLETION, UK_DETAILS, UK_CACHED };

struct usage_scan {
	int depth;              /* containers open; the usage object's members sit at 1 */
	enum usage_key key1;    /* the member of usage being read */
	enum usage_key key2;    /* the member of prompt_tokens_details being read */
	bool in_details;        /* inside the prompt_tokens_details object */
	bool unsure, done;
	double prompt, completion, cached;
};

#define USAGE_MAX_DEPTH 64

static enum usage_key usage_key_of(const unsigned char *k, size_t n)
{
#define IS(lit) (n == sizeof(lit) - 1 && !memcmp(k, lit, n))
	if (IS("prompt_tokens"))
		return UK_PROMPT;
	if (IS("completion_tokens"))
		return UK_COMPLETION;
	if (IS("prompt_tokens_details"))
		return UK_DETAILS;
	if (IS("cached_tokens"))
		return UK_CACHED;
	return UK_OTHER;
#undef IS
}

/* A value at the current depth: `num` is its number, or NULL for anything
 * else (which counts as 0). Returns 0 to stop yajl. */
static int usage_value(struct usage_scan *s, const double *num)
{
	double v = num ? *num : 0;

	if (s->depth == 0) {
		s->unsure = true; /* not an object: jansson's fallback decides */
		return 0;
	}
	if (s->depth == 1) {
		if (s->key1 == UK_PROMPT)
			s->prompt = v;
		else if (s->key1 == UK_COMPLETION)
			s->completion = v;
		else if (s->key1 == UK_DETAILS)
			s->cached = 0; /* a later duplicate replaces the earlier object */
	} else if (s->depth == 2 && s->in_details && s->key2 == UK_CACHED) {
		s->cached = v;
	}
	return 1;
}

static int u_null(void *ctx)
{
	return usage_value(ctx, NULL);
}

static int u_boolean(void *ctx, int b)
{
	(void)b;
	return usage_value(ctx, NULL);
}

static int u_number(void *ctx, const char *p, size_t n)
{
	struct usage_scan *s = ctx;
	char tmp[64];
	long long i;
	double v;

	enum fg_json_number kind;

	/* a token this long, or a number jansson refuses: jansson decides */
	if (n >= sizeof(tmp) || (kind = fg_json_number(p, n, tmp, &v, &i)) == FG_JSON_INT_TOO_BIG ||
	    kind == FG_JSON_REAL_OVERFLOW) {
		s->unsure = true;
		return 0;
	}
	return usage_value(s, &v);
}

static int u_string(void *ctx, const unsigned char *p, size_t n)
{
	(void)p;
	(void)n;
	return usage_value(ctx, NULL);
}

static int u_key(void *ctx, const unsigned char *k, size_t n)
{
	struct usage_scan *s = ctx;

	if (s->depth == 1)
		s->key1 = usage_key_of(k, n);
	else if (s->depth == 2)
		s->key2 = usage_key_of(k, n);
	return 1;
}

static int u_open(struct usage_scan *s)
{
	if (s->depth > 0 && !usage_value(s, NULL))
		return 0;
	if (++s->depth > USAGE_MAX_DEPTH)
		return s->unsure = true, 0;
	return 1;
}

static int u_start_map(void *ctx)
{
	struct usage_scan *s = ctx;
	bool details = s->depth == 1 && s->key1 == UK_DETAILS;

	if (!u_open(s))
		return 0;
	if (details) {
		s->in_details = true;
		s->key2 = UK_OTHER;
	}
	return 1;
}

static int u_start_array(void *ctx)
{
	struct usage_scan *s = ctx;

	if (s->depth == 0) {
		s->unsure = true;
		return 0;
	}
	return u_open(s);
}

static int u_close(void *ctx)
{
	struct usage_scan *s = ctx;

	if (--s->depth == 1)
		s->in_details = false;
	if (s->depth == 0) {
		s->done = true;
		return 0; /* the object is complete: whatever follows is not ours */
	}
	return 1;
}

static const yajl_callbacks usage_callbacks = {
	.yajl_null = u_null,
	.yajl_boolean = u_boolean,
	.yajl_number = u_number,
	.yajl_string = u_string,
	.yajl_start_map = u_start_map,
	.yajl_map_key = u_key,
	.yajl_end_map = u_close,
	.yajl_start_array = u_start_array,
	.yajl_end_array = u_close,
};

/* ---- the usual shape, read by hand ----
 *
 * What engines send: keys without escapes, values that are null or plain
 * non-negative integers, prompt_tokens_details null or an object of the
 * same. That shape is read here in one pass with the yajl reader's rules
 * (anything else reads 0, the last duplicate wins); the first byte of any
 * other shape (a string, a real, a sign, an array, a stray comma) hands
 * the whole object to the yajl reader. Even with the yajl handle on the
 * stack that reader cost ~4k instructions for ~100 bytes. */

static const char *skip_ws(const char *p, const char *e)
{
	while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

/* A key: its bytes between the quotes, or NULL when it is not plain. */
static const char *plain_key(const char **pp, const char *e, size_t *len)
{
	const char *p = *pp, *k;

	if (p >= e || *p != '"')
		return NULL;
	k = ++p;
	while (p < e && *p != '"') {
		if (*p == '\\' || (unsigned char)*p < 0x20)
			return NULL;
		p++;
	}
	if (p >= e)
		return NULL;
	*len = (size_t)(p - k);
	*pp = p + 1;
	return k;
}

/* null (0) or a plain non-negative integer of at most 18 digits; false for
 * anything else, a real or a longer number included. */
static bool plain_count(const char **pp, const char *e, double *out)
{
	const char *p = *pp;

	if (e - p >= 4 && !memcmp(p, "null", 4)) {
		*pp = p + 4;
		*out = 0;
		return true;
	}
	if (p >= e || *p < '0' || *p > '9')
		return false;
	long long v = 0;
	int digits = 0;
	if (*p == '0')
		p++;
	else
		for (; p < e && *p >= '0' && *p <= '9'; p++)
			if (++digits > 18)
				return false;
			else
				v = v * 10 + (*p - '0');
	if (p < e && ((*p >= '0' && *p <= '9') || *p == '.' || *p == 'e' || *p == 'E'))
		return false; /* a leading zero, a fraction, an exponent */
	*pp = p;
	*out = (double)v;
	return true;
}

/* An object of plain members (depth 1: usage, 2: its details); p is at the brace. */
static bool plain_object(const char **pp, const char *e, struct usage_scan *s, int depth)
{
	const char *p = skip_ws(*pp + 1, e);

	if (p < e && *p == '}') {
		*pp = p + 1;
		return true;
	}
	for (;;) {
		size_t kl;
		const char *k = plain_key(&p, e, &kl);
		if (!k)
			return false;
		p = skip_ws(p, e);
		if (p >= e || *p != ':')
			return false;
		p = skip_ws(p + 1, e);
		enum usage_key key = usage_key_of((const unsigned char *)k, kl);
		double v;
		if (depth == 1 && key == UK_DETAILS) {
			s->cached = 0; /* a later duplicate replaces the earlier object */
			if (p < e && *p == '{') {
				if (!plain_object(&p, e, s, 2))
					return false;
			} else if (!plain_count(&p, e, &v)) {
				return false;
			}
		} else {
			if (!plain_count(&p, e, &v))
				return false;
			if (depth == 1 && key == UK_PROMPT)
				s->prompt = v;
			else if (depth == 1 && key == UK_COMPLETION)
				s->completion = v;
			else if (depth == 2 && key == UK_CACHED)
				s->cached = v;
		}
		p = skip_ws(p, e);
		if (p < e && *p == '}') {
			*pp = p + 1;
			return true;
		}
		if (p >= e || *p != ',')
			return false;
		p = skip_ws(p + 1, e);
	}
}

int fg_usage_parse(const char *p, size_t n, struct fg_usage *u)
{
	struct usage_scan s = { 0 };

	/* what yajl reads more leniently than jansson, jansson reads */
	if (memchr(p, '\\', n) || memchr(p, '\v', n) || memchr(p, '\f', n) || memchr(p, 0, n))
		return -1;
	for (size_t k = 0; k < n; k++)
		if ((unsigned char)p[k] >= 0x80)
			return -1; /* yajl takes UTF-8 jansson refuses (overlong forms) */
	const char *at = skip_ws(p, p + n);
	if (at < p + n && *at == '{' && plain_object(&at, p + n, &s, 1)) {
		s.done = true;
	} else {
		/* yajl's handle from the stack: a malloc/free pair per allocation
		 * cost as much as reading the ~100 bytes */
		alignas(max_align_t) char mem[4096];
		struct fg_arena arena;
		fg_arena_init(&arena, mem, sizeof(mem));
		s = (struct usage_scan){ 0 };
		yajl_handle h = yajl_alloc(&usage_callbacks, &arena.funcs, &s);
		if (!h)
			return -1;
		yajl_parse(h, (const unsigned char *)p, n);
		yajl_free(h);
	}
	if (!s.done || s.unsure)
		return -1;
	u->prompt_tokens = s.prompt;
	u->completion_tokens = s.completion;
	u->cached_tokens = s.cached;
	return s.prompt >= 0 && s.prompt <= USAGE_TOKENS_MAX && s.completion >= 0 &&
	       s.completion <= USAGE_TOKENS_MAX && s.cached >= 0 && s.cached <= USAGE_TOKENS_MAX;
}

/* Find the end of the first event in [p, p+n): index just past the blank
 * line, or 0. Lines end in \n, \r\n or \r (the SSE spec allows all three). */
static size_t event_end(const char *p, size_t n, size_t from)
{
	for (size_t i = from >= 2 ? from - 2 : 0; i + 1 < n; i++) {
		if (p[i] == '\n' && p[i + 1] == '\n')
			return i + 2;
		if (p[i] == '\r' && p[i + 1] == '\r')
			return i + 2;
		if (p[i] == '\n' && p[i + 1] == '\r' && i + 2 < n && p[i + 2] == '\n')
			return i + 3;
	}
	return 0;
}

/* The data payload of a one-data-line event (what engines send), as a
 * pointer into the event; NULL for anything else, which passes untouched. */
static const char *data_payload(const char *ev, size_t n, size_t *plen)
{
	if (n < 6 || memcmp(ev, "data:", 5))
		return NULL;
	const char *p = ev + 5, *end = ev + n;
	if (p < end && *p == ' ')
		p++;
	const char *eol = p;
	while (eol < end && *eol != '\n' && *eol != '\r')
		eol++;
	*plen = (size_t)(eol - p);
	return p;
}

/* Returns true when the event is to be passed on. */
static bool judge_event(struct fg_sse *s, const char *ev, size_t n)
{
	size_t plen;
	const char *payload = data_payload(ev, n, &plen);

	if (!payload)
		return true;
	if (plen == 6 && !memcmp(payload, "[DONE]", 6)) {
		s->saw_done = true;
		return true;
	}
	/* only events naming usage are worth a JSON parse */
	if (!memmem(payload, plen, "\"usage\"", 7)) {
		s->content_events++;
		return true;
	}
	json_t *o = json_loadb(payload, plen, 0, NULL);
	if (!o) {
		s->content_events++;
		return true;
	}
	struct fg_usage u;
	bool has_usage = fg_usage_from_json(o, &u);
	const json_t *choices = json_object_get(o, "choices");
	/* the chunk the agent forced on is hidden even when its numbers are not usable */
	bool usage_only = json_is_object(json_object_get(o, "usage")) && json_is_array(choices) &&
			  json_array_size(choices) == 0;
	if (has_usage) {
		s->usage = u;
		s->have_usage = true;
	}
	json_decref(o);
	if (usage_only)
		return !s->hide_usage_chunk;
	s->content_events++;
	return true;
}

int fg_sse_feed(struct fg_sse *s, const char *p, size_t n, struct fg_buf *out)
{
	/* fast path: nothing pending, events complete inside this piece */
	size_t start = 0;
	if (!fg_buf_used(&s->pending)) {
		size_t end;
		while (start < n && (end = event_end(p + start, n - start, 0))) {
			if (judge_event(s, p + start, end) && fg_buf_append(out, p + start, end))
				return -1;
			start += end;
		}
		if (start == n)
			return 0;
		s->scanned = 0;
		return fg_buf_append(&s->pending, p + start, n - start);
	}
	if (fg_buf_append(&s->pending, p, n))
		return -1;
	for (;;) {
		const char *h = fg_buf_head(&s->pending);
		size_t used = fg_buf_used(&s->pending);
		size_t end = event_end(h, used, s->scanned);
		if (!end) {
			s->scanned = used;
			return 0;
		}
		if (judge_event(s, h, end) && fg_buf_append(out, h, end))
			return -1;
		fg_buf_consume(&s->pending, end);
		s->scanned = 0;
	}
}

int fg_sse_finish(struct fg_sse *s, struct fg_buf *out)
{
	size_t used = fg_buf_used(&s->pending);

	if (used && judge_event(s, fg_buf_head(&s->pending), used) &&
	    fg_buf_append(out, fg_buf_head(&s->pending), used))
		return -1;
	fg_buf_reset(&s->pending);
	return 0;
}
