/* http_sse.c — event-by-event SSE relay with usage extraction; see
 * http_sse.h. */
#include <jansson.h>
#include <stdalign.h>
#include <stddef.h>
#include <string.h>
#include <yajl/yajl_parse.h>
#include "agent/http/http_sse.h"
#include "lib/json_number.h"
#include "lib/yajl_arena.h"

void fg_sse_init(struct fg_sse *s, enum fg_sse_kind kind, bool hide_usage_chunk,
		 bool strip_chunk_usage)
{
	memset(s, 0, sizeof(*s));
	s->kind = kind;
	s->hide_usage_chunk = hide_usage_chunk;
	s->strip_chunk_usage = strip_chunk_usage;
}

double fg_sse_output(const struct fg_sse *s)
{
	double events = (double)s->content_events;

	if (s->final_usage)
		return s->usage.completion_tokens;
	return s->have_usage && s->usage.completion_tokens > events ? s->usage.completion_tokens
								     : events;
}

/* vLLM's first chunk of a chat choice: the role, no text (not a token). */
static bool role_chunk(const char *pl, size_t n)
{
	static const char role[] = "\"delta\":{\"role\":\"assistant\",\"content\":\"\"}";

	return memmem(pl, n, role, sizeof(role) - 1) != NULL;
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

/* The chat name if the object has it, else the responses API's. */
static const char *name_of(const json_t *o, const char *chat, const char *responses)
{
	return json_object_get(o, chat) ? chat : responses;
}

bool fg_usage_from_json(const json_t *obj, struct fg_usage *u)
{
	const json_t *usage = json_object_get(obj, "usage");

	if (!json_is_object(usage))
		return false;
	const char *details = name_of(usage, "prompt_tokens_details", "input_tokens_details");
	return num(usage, name_of(usage, "prompt_tokens", "input_tokens"), &u->prompt_tokens) &&
	       num(usage, name_of(usage, "completion_tokens", "output_tokens"),
		   &u->completion_tokens) &&
	       num(json_object_get(usage, details), "cached_tokens", &u->cached_tokens);
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

enum usage_key { UK_OTHER, UK_PROMPT, UK_COMPLETION, UK_DETAILS, UK_CACHED, UK_INPUT,
		 UK_OUTPUT, UK_INPUT_DETAILS };

/* Counts under both APIs' names: the chat name wins where both appear. */
struct usage_scan {
	int depth;              /* containers open; the usage object's members sit at 1 */
	enum usage_key key1;    /* the member of usage being read */
	enum usage_key key2;    /* the member of the details object being read */
	int in_details;         /* inside prompt_tokens_details (1) / input_tokens_details (2) */
	bool unsure, done;
	bool has_prompt, has_completion, has_details;
	double prompt, completion, cached;
	double input, output, input_cached;
};

/* The counts a usage object stands for, under fg_usage_from_json's rules. */
static void usage_result(const struct usage_scan *s, struct fg_usage *u)
{
	u->prompt_tokens = s->has_prompt ? s->prompt : s->input;
	u->completion_tokens = s->has_completion ? s->completion : s->output;
	u->cached_tokens = s->has_details ? s->cached : s->input_cached;
}

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
	if (IS("input_tokens"))
		return UK_INPUT;
	if (IS("output_tokens"))
		return UK_OUTPUT;
	if (IS("input_tokens_details"))
		return UK_INPUT_DETAILS;
	return UK_OTHER;
#undef IS
}

/* A member of the usage object read as `v` (0 for what is not a number);
 * a details member resets its cached count (a later duplicate replaces the
 * earlier object). */
static void usage_member(struct usage_scan *s, enum usage_key key, double v)
{
	switch (key) {
	case UK_PROMPT:
		s->prompt = v, s->has_prompt = true;
		break;
	case UK_COMPLETION:
		s->completion = v, s->has_completion = true;
		break;
	case UK_DETAILS:
		s->cached = 0, s->has_details = true;
		break;
	case UK_INPUT:
		s->input = v;
		break;
	case UK_OUTPUT:
		s->output = v;
		break;
	case UK_INPUT_DETAILS:
		s->input_cached = 0;
		break;
	default:
		break;
	}
}

static void usage_cached(struct usage_scan *s, int details, double v)
{
	if (details == 1)
		s->cached = v;
	else
		s->input_cached = v;
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
	if (s->depth == 1)
		usage_member(s, s->key1, v);
	else if (s->depth == 2 && s->in_details && s->key2 == UK_CACHED)
		usage_cached(s, s->in_details, v);
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
	int details = s->depth != 1 ? 0 : s->key1 == UK_DETAILS ? 1
		      : s->key1 == UK_INPUT_DETAILS ? 2 : 0;

	if (!u_open(s))
		return 0;
	if (details) {
		s->in_details = details;
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
		s->in_details = 0;
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
		if (depth == 1 && (key == UK_DETAILS || key == UK_INPUT_DETAILS)) {
			usage_member(s, key, 0);
			if (p < e && *p == '{') {
				s->in_details = key == UK_DETAILS ? 1 : 2;
				if (!plain_object(&p, e, s, 2))
					return false;
				s->in_details = 0;
			} else if (!plain_count(&p, e, &v)) {
				return false;
			}
		} else {
			if (!plain_count(&p, e, &v))
				return false;
			if (depth == 1)
				usage_member(s, key, v);
			else if (key == UK_CACHED)
				usage_cached(s, s->in_details, v);
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

static int usage_verdict(const struct usage_scan *s, struct fg_usage *u)
{
	usage_result(s, u);
	return u->prompt_tokens >= 0 && u->prompt_tokens <= USAGE_TOKENS_MAX &&
	       u->completion_tokens >= 0 && u->completion_tokens <= USAGE_TOKENS_MAX &&
	       u->cached_tokens >= 0 && u->cached_tokens <= USAGE_TOKENS_MAX;
}

int fg_usage_parse_plain(const char *p, size_t n, struct fg_usage *u, size_t *end)
{
	struct usage_scan s = { 0 };
	const char *at = skip_ws(p, p + n);

	if (!(at < p + n && *at == '{' && plain_object(&at, p + n, &s, 1)))
		return -1;
	*end = (size_t)(at - p);
	return usage_verdict(&s, u);
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
	return usage_verdict(&s, u);
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

/* Where the line after `p` starts (past \n, \r\n or \r), or end. */
static const char *next_line(const char *p, const char *end)
{
	while (p < end && *p != '\n' && *p != '\r')
		p++;
	if (p < end && *p == '\r')
		p++;
	if (p < end && p[-1] == '\r' && *p == '\n')
		p++;
	else if (p < end && *p == '\n')
		p++;
	return p;
}

/* The event's one data line (what engines send), as a pointer into the
 * event, and its `event:` name if it has one; NULL for anything else (no
 * data, several data lines), which passes untouched. */
static const char *data_payload(const char *ev, size_t n, size_t *plen, const char **name,
				size_t *name_len)
{
	const char *p = ev, *end = ev + n, *data = NULL;

	*name = NULL;
	*name_len = 0;
	while (p < end && *p != '\n' && *p != '\r') {
		const char *line = p, *eol = p;
		while (eol < end && *eol != '\n' && *eol != '\r')
			eol++;
		size_t ll = (size_t)(eol - line);
		if (ll >= 5 && !memcmp(line, "data:", 5)) {
			if (data)
				return NULL; /* several data lines: passed as they are */
			data = line + 5;
			if (data < eol && *data == ' ')
				data++;
			*plen = (size_t)(eol - data);
		} else if (ll >= 6 && !memcmp(line, "event:", 6)) {
			*name = line + 6;
			if (*name < eol && **name == ' ')
				(*name)++;
			*name_len = (size_t)(eol - *name);
		}
		p = next_line(eol, end);
	}
	return data;
}

static int emit(struct fg_buf *out, const char *p, size_t n)
{
	return n ? fg_buf_append(out, p, n) : 0;
}

/* The engine's prompt count, heard once, from a chunk with choices. */
static bool hear_prompt(struct fg_sse *s, const struct fg_usage *u)
{
	if (s->prompt_reported)
		return true;
	s->prompt_reported = true;
	if (s->on_prompt && !s->on_prompt(s->ctx, u->prompt_tokens)) {
		s->stopped = true;
		return false;
	}
	return true;
}

/* The offset just past `"key":` for the last occurrence of the key in p
 * (an unescaped quote can only open a key or a string), or 0. */
static size_t last_key(const char *p, size_t n, const char *key, size_t kl)
{
	for (const char *e = p + n, *q; (q = memrchr(p, '"', (size_t)(e - p))); e = q)
		if ((size_t)(p + n - q) >= kl && !memcmp(q, key, kl))
			return (size_t)(q - p) + kl;
	return 0;
}

/* A chunk in vLLM's shape: usage as the top object's last member, read by
 * the plain reader. 1: *u read (or *valid false: counts unusable) and
 * [*cut_from, *cut_to) is the member with its comma; *usage_only when its
 * choices are []. 0: another shape. */
static int chunk_usage(const char *pl, size_t n, struct fg_usage *u, bool *valid,
		       size_t *cut_from, size_t *cut_to, bool *usage_only)
{
	static const char key[] = "\"usage\":", ch[] = "\"choices\":";
	size_t at = last_key(pl, n, key, sizeof(key) - 1), end;

	if (!at)
		return 0;
	int r = fg_usage_parse_plain(pl + at, n - at, u, &end);
	if (r < 0)
		return 0;
	size_t k = at + end;
	while (k < n && (pl[k] == ' ' || pl[k] == '\t'))
		k++;
	if (k >= n || pl[k] != '}')
		return 0;
	for (k++; k < n; k++)
		if (pl[k] != ' ' && pl[k] != '\t')
			return 0; /* not the top object's last member */
	size_t c = last_key(pl, at - (sizeof(key) - 1), ch, sizeof(ch) - 1);
	if (!c || memmem(pl, c - (sizeof(ch) - 1), ch, sizeof(ch) - 1))
		return 0; /* no choices, or more than one: let jansson say */
	while (c < n && (pl[c] == ' ' || pl[c] == '\t'))
		c++;
	if (c >= n || pl[c] != '[')
		return 0;
	for (c++; c < n && (pl[c] == ' ' || pl[c] == '\t'); c++)
		;
	*usage_only = c < n && pl[c] == ']';
	size_t from = at - (sizeof(key) - 1);
	size_t b = from;
	while (b > 0 && (pl[b - 1] == ' ' || pl[b - 1] == '\t'))
		b--;
	*cut_from = b > 0 && pl[b - 1] == ',' ? b - 1 : from;
	*cut_to = at + end;
	*valid = r == 1;
	return 1;
}

/* The jansson reading of a chunk that names usage in another shape. */
static void chunk_usage_slow(const char *pl, size_t n, struct fg_usage *u, bool *valid,
			     bool *usage_only, bool *is_json)
{
	json_t *o = json_loadb(pl, n, 0, NULL);

	*is_json = o != NULL;
	*valid = *usage_only = false;
	if (!o)
		return;
	*valid = fg_usage_from_json(o, u);
	const json_t *choices = json_object_get(o, "choices");
	/* the chunk the agent forced on is hidden even when its numbers are not usable */
	*usage_only = json_is_object(json_object_get(o, "usage")) && json_is_array(choices) &&
		      json_array_size(choices) == 0;
	json_decref(o);
}

static int relay_chunk(struct fg_sse *s, const char *ev, size_t n, const char *pl, size_t plen,
		       struct fg_buf *out)
{
	if (plen == 6 && !memcmp(pl, "[DONE]", 6)) {
		s->saw_done = true;
		return emit(out, ev, n);
	}
	/* only events naming usage are worth a closer look */
	if (!memmem(pl, plen, "\"usage\"", 7)) {
		s->content_events += !role_chunk(pl, plen);
		return emit(out, ev, n);
	}
	struct fg_usage u = { 0 };
	bool valid, usage_only, is_json = true;
	size_t cut_from = 0, cut_to = 0;
	bool cuttable = chunk_usage(pl, plen, &u, &valid, &cut_from, &cut_to, &usage_only);
	if (!cuttable)
		chunk_usage_slow(pl, plen, &u, &valid, &usage_only, &is_json);
	if (!is_json) {
		s->content_events++;
		return emit(out, ev, n);
	}
	if (valid) {
		s->usage = u;
		s->have_usage = true;
		s->final_usage = usage_only;
	}
	if (usage_only)
		return s->hide_usage_chunk ? 0 : emit(out, ev, n);
	s->content_events += !role_chunk(pl, plen);
	if (valid && !hear_prompt(s, &u))
		return 0;
	if (!s->strip_chunk_usage || !cuttable)
		return emit(out, ev, n);
	/* the usage member the client did not ask for comes out */
	size_t off = (size_t)(pl - ev);
	if (emit(out, ev, off + cut_from))
		return -1;
	return emit(out, ev + off + cut_to, n - off - cut_to);
}

/* The value after the last `"type":"` (the top object's: the responses
 * API's event types put it last), or NULL. */
static const char *event_type(const char *pl, size_t n, size_t *len)
{
	static const char key[] = "\"type\":\"";
	size_t at = last_key(pl, n, key, sizeof(key) - 1);
	const char *q;

	if (!at || !(q = memchr(pl + at, '"', n - at)))
		return NULL;
	*len = (size_t)(q - (pl + at));
	return pl + at;
}

static bool ends_with(const char *p, size_t n, const char *tail)
{
	size_t tl = strlen(tail);

	return n >= tl && !memcmp(p + n - tl, tail, tl);
}

static bool is_name(const char *p, size_t n, const char *want)
{
	return strlen(want) == n && !memcmp(p, want, n);
}

static int relay_response_event(struct fg_sse *s, const char *ev, size_t n, const char *pl,
				size_t plen, const char *name, size_t name_len, struct fg_buf *out)
{
	if (!name)
		name = event_type(pl, plen, &name_len);
	if (name && ends_with(name, name_len, ".delta")) {
		s->content_events++; /* a token, or a few characters of one */
	} else if (name && (is_name(name, name_len, "response.completed") ||
			    is_name(name, name_len, "response.incomplete") ||
			    is_name(name, name_len, "response.failed"))) {
		json_t *o = json_loadb(pl, plen, 0, NULL);
		struct fg_usage u;
		if (o && fg_usage_from_json(json_object_get(o, "response"), &u)) {
			s->usage = u;
			s->have_usage = s->final_usage = true;
		}
		json_decref(o);
	}
	return emit(out, ev, n);
}

static int relay_event(struct fg_sse *s, const char *ev, size_t n, struct fg_buf *out)
{
	size_t plen = 0, name_len;
	const char *name;

	if (s->stopped)
		return 0;
	const char *pl = data_payload(ev, n, &plen, &name, &name_len);
	if (!pl)
		return emit(out, ev, n);
	if (s->kind == FG_SSE_RESPONSES)
		return relay_response_event(s, ev, n, pl, plen, name, name_len, out);
	return relay_chunk(s, ev, n, pl, plen, out);
}

int fg_sse_feed(struct fg_sse *s, const char *p, size_t n, struct fg_buf *out)
{
	/* fast path: nothing pending, events complete inside this piece */
	size_t start = 0;
	if (!fg_buf_used(&s->pending)) {
		size_t end;
		while (start < n && (end = event_end(p + start, n - start, 0))) {
			if (relay_event(s, p + start, end, out))
				return -1;
			start += end;
		}
		if (start == n || s->stopped)
			return 0;
		s->scanned = 0;
		return fg_buf_append(&s->pending, p + start, n - start);
	}
	if (s->stopped)
		return 0;
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
		if (relay_event(s, h, end, out))
			return -1;
		fg_buf_consume(&s->pending, end);
		s->scanned = 0;
	}
}

int fg_sse_finish(struct fg_sse *s, struct fg_buf *out)
{
	size_t used = fg_buf_used(&s->pending);

	if (used && relay_event(s, fg_buf_head(&s->pending), used, out))
		return -1;
	fg_buf_reset(&s->pending);
	return 0;
}
