/* http_request.c — validate, measure and rewrite request bodies in one
 * streaming pass; see http_request.h.
 *
 * yajl tokenises and checks the grammar; this file adds what a body must
 * also be to reach the engine (the rules it was held to when a jansson tree
 * was built: strict UTF-8, no NUL, no lone surrogate escapes, numbers in
 * range, depth <= 2048, no duplicate keys anywhere) and records, as the
 * tokens go by, only what admission and the rewrite need. A 1 MiB prompt
 * costs a pass over its bytes, not a tree of them. */
#include <errno.h>
#include <http_parser.h>
#include <math.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>

#include "agent/http_request.h"
#include "agent/json_number.h"
#include "agent/yajl_arena.h"

#define MAX_CHOICES 128     /* OpenAI's own limit on n */
#define MAX_DEPTH 2048      /* jansson's limit, which bodies were held to before */
#define SMALL_OBJECT 8      /* keys compared one by one; larger objects sorted */
#define ARENA_BYTES 8192    /* yajl and the key tables of a typical body: no malloc */

static bool path_is(const char *path, size_t len, const char *want)
{
	size_t wl = strlen(want);

	if (len < wl || memcmp(path, want, wl))
		return false;
	return len == wl || path[wl] == '?' || (path[wl] == '/' && len == wl + 1);
}

enum fg_api fg_api_of(int method, const char *path, size_t len)
{
	if (method == HTTP_GET || method == HTTP_HEAD || method == HTTP_OPTIONS)
		return FG_API_NONE;
	if (method == HTTP_POST) {
		if (path_is(path, len, "/v1/chat/completions"))
			return FG_API_CHAT;
		if (path_is(path, len, "/v1/completions"))
			return FG_API_COMPLETIONS;
		if (path_is(path, len, "/v1/embeddings"))
			return FG_API_EMBEDDINGS;
	}
	return FG_API_OTHER_BODY;
}


/* ---- strict UTF-8, no NUL ---------------------------------------------------- */

/* Offset of the first byte that is not strict UTF-8 (RFC 3629: no
 * overlongs, no surrogates, nothing past U+10FFFF) or is NUL; len if none.
 * Eight ASCII bytes at a time: prompts are mostly ASCII. */
static size_t utf8_bad_at(const unsigned char *p, size_t len)
{
	size_t i = 0;

	while (i < len) {
		if (i + 8 <= len) {
			uint64_t w;
			memcpy(&w, p + i, 8);
			uint64_t zero = (w - 0x0101010101010101ull) & ~w & 0x8080808080808080ull;
			if (!((w & 0x8080808080808080ull) | zero)) {
				i += 8;
				continue;
			}
		}
		unsigned c = p[i];
		if (c && c < 0x80) {
			i++;
			continue;
		}
		unsigned lo = 0x80, hi = 0xbf;
		size_t n;
		if (c >= 0xc2 && c <= 0xdf)
			n = 1;
		else if (c >= 0xe0 && c <= 0xef)
			n = 2, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
		else if (c >= 0xf0 && c <= 0xf4)
			n = 3, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
		else
			return i; /* NUL, a continuation byte, C0/C1, F5.. */
		if (i + n >= len || p[i + 1] < lo || p[i + 1] > hi)
			return i;
		for (size_t k = 2; k <= n; k++)
			if (p[i + k] < 0x80 || p[i + k] > 0xbf)
				return i;
		i += n + 1;
	}
	return len;
}

static bool all_space(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r' && p[i] != '\n')
			return false;
	return true;
}

/* ---- the streaming pass -------------------------------------------------------- */

enum vtype { V_NONE = 0, V_NULL, V_BOOL, V_INT, V_REAL, V_STRING, V_ARRAY, V_OBJECT };

/* The top-level member a token belongs to. */
enum slot { S_OTHER = 0, S_MODEL, S_MESSAGES, S_TOOLS, S_PROMPT, S_MAX_COMPLETION, S_MAX_TOKENS,
	    S_N, S_STREAM, S_STREAM_OPTIONS, S_CACHE_SALT, S_PRIORITY, S_NSLOTS };

struct scalar {
	enum vtype type;
	bool b;
	long long i;
};

struct key_ref {
	uint32_t off, len; /* in scan.keys */
};

struct object_frame {
	size_t first_ref, keys_len;
};

/* Cuts for the members of one object: the top level, or stream_options. */
struct scope {
	uint32_t members;
	bool has_kept;              /* a member that stays has been read */
	size_t kept_end;            /* where the last one's value ends */
	struct fg_req_member *cur;  /* the member being read, when tracked */
	struct fg_req_member *pend; /* tracked member whose cut ends at the next key */
	size_t *pend_to;
};

struct scan {
	const char *body;
	size_t len;
	yajl_handle h;
	enum fg_api api;
	struct fg_req_info *info;
	const char *err;            /* a static message, or NULL: see err_buf */
	char err_buf[160];

	int depth;                  /* open containers */
	size_t top_end;             /* where the top-level object ends */
	bool not_object;
	enum slot slot;             /* of the current top-level member */
	bool so_key_iu;             /* inside stream_options: the member is include_usage */

	struct scalar v[S_NSLOTS];  /* the top-level members' types and scalars */
	uint64_t messages, chat_chars;
	int64_t bad_message;        /* first messages[i] that is not an object */
	uint64_t prompt_items, prompt_ints, prompt_chars, prompt_ids;
	bool prompt_bad, inner_all_ints;
	uint64_t inner_items;
	struct scalar iu;           /* stream_options.include_usage */
	struct fg_req_member iu_cut;/* and where it sits */

	struct scope top, so;
	struct fg_arena *arena;     /* yajl's and these tables' memory */
	char *keys;                 /* the open objects' keys, for duplicates */
	size_t keys_len, keys_cap;
	struct key_ref *refs;
	size_t n_refs, cap_refs;
	struct object_frame *objs;
	size_t n_objs, cap_objs;
	char *num;                  /* a number's text, NUL-terminated for strto* */
	size_t num_cap;
};

static int fail_with(struct scan *sc, const char *why)
{
	sc->err = why;
	return 0; /* yajl: cancel */
}

static size_t consumed(const struct scan *sc)
{
	return yajl_get_bytes_consumed(sc->h);
}

/* The opening quote of the string token whose closing quote is at `close`:
 * a quote inside a string always follows an odd run of backslashes. */
static size_t open_quote(const char *b, size_t close)
{
	size_t i = close;

	while (i > 0) {
		const char *q = memrchr(b, '"', i);
		if (!q)
			return 0;
		size_t j = (size_t)(q - b), bs = 0;
		while (bs < j && b[j - 1 - bs] == '\\')
			bs++;
		if (!(bs & 1))
			return j;
		i = j;
	}
	return 0;
}

static int hex4(const char *p)
{
	int v = 0;

	for (int k = 0; k < 4; k++) {
		char ch = p[k];
		v <<= 4;
		if (ch >= '0' && ch <= '9')
			v |= ch - '0';
		else if (ch >= 'a' && ch <= 'f')
			v |= ch - 'a' + 10;
		else if (ch >= 'A' && ch <= 'F')
			v |= ch - 'A' + 10;
		else
			return -1;
	}
	return v;
}

/* yajl decodes \u escapes leniently (a lone surrogate becomes '?', \u0000 a
 * NUL): check the raw token of a string that had escapes. */
static int check_escapes(struct scan *sc)
{
	size_t close = consumed(sc) - 1, open = open_quote(sc->body, close);
	const char *p = sc->body + open + 1, *end = sc->body + close;

	while ((p = memchr(p, '\\', (size_t)(end - p)))) {
		if (p[1] != 'u') {
			p += 2;
			continue;
		}
		int cp = end - p >= 6 ? hex4(p + 2) : -1;
		if (cp == 0)
			return fail_with(sc, "\\u0000 is not allowed in a string");
		if (cp >= 0xdc00 && cp <= 0xdfff)
			return fail_with(sc, "invalid Unicode escape: a lone low surrogate");
		if (cp >= 0xd800 && cp <= 0xdbff) {
			int lo = end - p >= 12 && p[6] == '\\' && p[7] == 'u' ? hex4(p + 8) : -1;
			if (lo < 0xdc00 || lo > 0xdfff)
				return fail_with(sc, "invalid Unicode escape: a lone high surrogate");
			p += 6;
		}
		p += 6;
	}
	return 1;
}

static bool in_body(const struct scan *sc, const unsigned char *s)
{
	uintptr_t a = (uintptr_t)s, b = (uintptr_t)sc->body;

	return a >= b && a <= b + sc->len;
}

/* ---- member cuts (for the rewrite) ---- */

static void scope_key(struct scope *s, size_t key_start, struct fg_req_member *tracked)
{
	if (s->pend) {
		*s->pend_to = key_start;
		s->pend = NULL;
	}
	s->cur = tracked;
	if (tracked) {
		tracked->present = true;
		tracked->cut_from = key_start;
	}
	s->members++;
}

static void scope_value_end(struct scope *s, size_t end)
{
	if (s->cur) {
		s->cur->cut_to = s->cur->value_end = end; /* unless a next key comes */
		s->pend = s->cur;
		s->pend_to = &s->cur->cut_to;
	} else {
		s->has_kept = true;
		s->kept_end = end;
	}
}

static void scope_close(struct scope *s)
{
	s->pend = NULL;
}

/* ---- duplicate keys ---- */

static int key_cmp(const void *a, const void *b, void *arg)
{
	const struct key_ref *x = a, *y = b;
	const char *k = arg;
	size_t n = x->len < y->len ? x->len : y->len;
	int r = n ? memcmp(k + x->off, k + y->off, n) : 0; /* k is NULL while all keys are "" */

	return r ? r : (x->len > y->len) - (x->len < y->len);
}

static int add_key(struct scan *sc, const unsigned char *s, size_t l)
{
	struct object_frame *f = &sc->objs[sc->n_objs - 1];
	size_t count = sc->n_refs - f->first_ref;

	if (count < SMALL_OBJECT)
		for (size_t i = f->first_ref; i < sc->n_refs; i++)
			if (sc->refs[i].len == l && (!l || !memcmp(sc->keys + sc->refs[i].off, s, l)))
				return fail_with(sc, "duplicate object key");
	if (sc->n_refs == sc->cap_refs) {
		size_t cap = sc->cap_refs ? 2 * sc->cap_refs : 32;
		struct key_ref *r = fg_arena_realloc(sc->arena, sc->refs, cap * sizeof(*r));
		if (!r)
			return fail_with(sc, "out of memory");
		sc->refs = r;
		sc->cap_refs = cap;
	}
	if (sc->keys_len + l > UINT32_MAX)
		return fail_with(sc, "out of memory");
	if (sc->keys_cap - sc->keys_len < l) {
		size_t cap = sc->keys_cap ? sc->keys_cap : 512;
		while (cap - sc->keys_len < l)
			cap *= 2;
		char *k = fg_arena_realloc(sc->arena, sc->keys, cap);
		if (!k)
			return fail_with(sc, "out of memory");
		sc->keys = k;
		sc->keys_cap = cap;
	}
	if (l)
		memcpy(sc->keys + sc->keys_len, s, l);
	sc->keys_len += l;
	sc->refs[sc->n_refs++] = (struct key_ref){ (uint32_t)(sc->keys_len - l), (uint32_t)l };
	return 1;
}

static int end_object_keys(struct scan *sc)
{
	struct object_frame *f = &sc->objs[--sc->n_objs];
	size_t count = sc->n_refs - f->first_ref;

	if (count > SMALL_OBJECT) {
		struct key_ref *r = sc->refs + f->first_ref;
		qsort_r(r, count, sizeof(*r), key_cmp, sc->keys);
		for (size_t i = 1; i < count; i++)
			if (!key_cmp(&r[i - 1], &r[i], sc->keys))
				return fail_with(sc, "duplicate object key");
	}
	sc->n_refs = f->first_ref;
	sc->keys_len = f->keys_len;
	return 1;
}

/* ---- values ---- */

/* A value starts (scalars: and ends) at nesting level sc->depth. */
static int on_value(struct scan *sc, enum vtype t, size_t slen, bool b, long long i)
{
	int level = sc->depth;
	struct scalar sv = { t, b, i };

	if (level == 0)
		sc->not_object = t != V_OBJECT;
	else if (level == 1) {
		sc->v[sc->slot] = sv;
		if (sc->slot == S_PROMPT && t == V_STRING)
			sc->prompt_chars = slen;
	}
	switch (level ? sc->slot : S_OTHER) {
	case S_MESSAGES:
		if (level == 2 && t != V_OBJECT && sc->bad_message < 0)
			sc->bad_message = (int64_t)sc->messages;
		if (level == 2)
			sc->messages++;
		__attribute__((fallthrough)); /* every string inside counts */
	case S_TOOLS:
		if (t == V_STRING)
			sc->chat_chars += slen;
		break;
	case S_PROMPT:
		if (level == 2) {
			sc->prompt_items++;
			if (t == V_INT)
				sc->prompt_ints++;
			else if (t == V_STRING)
				sc->prompt_chars += slen;
			else if (t == V_ARRAY)
				sc->inner_all_ints = true, sc->inner_items = 0;
			else
				sc->prompt_bad = true;
		} else if (level == 3) {
			sc->inner_items++;
			if (t != V_INT)
				sc->inner_all_ints = false;
		}
		break;
	case S_STREAM_OPTIONS:
		if (level == 2 && sc->so_key_iu)
			sc->iu = sv;
		break;
	default:
		break;
	}
	if (t != V_ARRAY && t != V_OBJECT) /* a scalar ends here */
		return 1;
	if (level >= MAX_DEPTH)
		return fail_with(sc, "maximum parsing depth reached");
	sc->depth++;
	return 1;
}

/* A scalar or container at `level` has ended at the current offset. */
static void value_ended(struct scan *sc, int level)
{
	if (level == 1)
		scope_value_end(&sc->top, consumed(sc));
	else if (level == 2 && sc->slot == S_STREAM_OPTIONS && sc->v[S_STREAM_OPTIONS].type == V_OBJECT)
		scope_value_end(&sc->so, consumed(sc));
}

static int cb_null(void *ctx)
{
	struct scan *sc = ctx;

	if (!on_value(sc, V_NULL, 0, false, 0))
		return 0;
	value_ended(sc, sc->depth);
	return 1;
}

static int cb_boolean(void *ctx, int b)
{
	struct scan *sc = ctx;

	if (!on_value(sc, V_BOOL, 0, b, 0))
		return 0;
	value_ended(sc, sc->depth);
	return 1;
}

/* Numbers as JSON allows them and a long long / double can hold them:
 * integers are numbers without fraction or exponent. */
static int cb_number(void *ctx, const char *s, size_t l)
{
	struct scan *sc = ctx;
	long long i;
	double d;

	if (l + 1 > sc->num_cap) {
		char *n = fg_arena_realloc(sc->arena, sc->num, l + 1);
		if (!n)
			return fail_with(sc, "out of memory");
		sc->num = n;
		sc->num_cap = l + 1;
	}
	enum fg_json_number kind = fg_json_number(s, l, sc->num, &d, &i);

	if (kind == FG_JSON_REAL_OVERFLOW)
		return fail_with(sc, "real number overflow");
	if (kind == FG_JSON_INT_TOO_BIG)
		return fail_with(sc, "too big integer");
	if (!on_value(sc, kind == FG_JSON_REAL ? V_REAL : V_INT, 0, false, i))
		return 0;
	value_ended(sc, sc->depth);
	return 1;
}

static int cb_string(void *ctx, const unsigned char *s, size_t l)
{
	struct scan *sc = ctx;

	if (!in_body(sc, s) && !check_escapes(sc))
		return 0;
	if (!on_value(sc, V_STRING, l, false, 0))
		return 0;
	if (sc->depth == 1 && sc->slot == S_MODEL) {
		/* truncated like snprintf("%.*s") would; a NUL never gets here */
		size_t n = l < sizeof(sc->info->model) - 1 ? l : sizeof(sc->info->model) - 1;
		memcpy(sc->info->model, s, n);
		sc->info->model[n] = 0;
	}
	value_ended(sc, sc->depth);
	return 1;
}

static enum slot slot_of(const struct scan *sc, const unsigned char *s, size_t l)
{
	static const struct { const char *name; enum slot slot; } names[] = {
		{ "model", S_MODEL },
		{ "max_completion_tokens", S_MAX_COMPLETION },
		{ "max_tokens", S_MAX_TOKENS },
		{ "n", S_N },
		{ "stream", S_STREAM },
		{ "stream_options", S_STREAM_OPTIONS },
		{ "cache_salt", S_CACHE_SALT },
		{ "priority", S_PRIORITY },
	};
	const char *prompt = sc->api == FG_API_COMPLETIONS ? "prompt"
			     : sc->api == FG_API_EMBEDDINGS ? "input" : NULL;

	if (sc->api == FG_API_CHAT && l == 8 && !memcmp(s, "messages", 8))
		return S_MESSAGES;
	if (sc->api == FG_API_CHAT && l == 5 && !memcmp(s, "tools", 5))
		return S_TOOLS;
	if (prompt && l == strlen(prompt) && !memcmp(s, prompt, l))
		return S_PROMPT;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (l == strlen(names[i].name) && !memcmp(s, names[i].name, l))
			return names[i].slot;
	return S_OTHER;
}

static int cb_map_key(void *ctx, const unsigned char *s, size_t l)
{
	struct scan *sc = ctx;
	bool escaped = !in_body(sc, s);

	if (escaped && !check_escapes(sc))
		return 0;
	if (memchr(s, 0, l))
		return fail_with(sc, "\\u0000 is not allowed in a string");
	if (!add_key(sc, s, l))
		return 0;
	if (sc->depth == 1) {
		sc->slot = slot_of(sc, s, l);
		struct fg_req_info *in = sc->info;
		struct fg_req_member *tracked = sc->slot == S_CACHE_SALT ? &in->cache_salt
						: sc->slot == S_PRIORITY ? &in->priority
						: sc->slot == S_STREAM_OPTIONS ? &in->stream_options : NULL;
		scope_key(&sc->top, open_quote(sc->body, consumed(sc) - 1), tracked);
	} else if (sc->depth == 2 && sc->slot == S_STREAM_OPTIONS) {
		sc->so_key_iu = l == 13 && !memcmp(s, "include_usage", 13);
		scope_key(&sc->so, open_quote(sc->body, consumed(sc) - 1),
			  sc->so_key_iu ? &sc->iu_cut : NULL);
	}
	return 1;
}

static int cb_start_map(void *ctx)
{
	struct scan *sc = ctx;
	int level = sc->depth;

	if (!on_value(sc, V_OBJECT, 0, false, 0))
		return 0;
	if (sc->n_objs == sc->cap_objs) {
		size_t cap = sc->cap_objs ? 2 * sc->cap_objs : 16;
		struct object_frame *o = fg_arena_realloc(sc->arena, sc->objs, cap * sizeof(*o));
		if (!o)
			return fail_with(sc, "out of memory");
		sc->objs = o;
		sc->cap_objs = cap;
	}
	sc->objs[sc->n_objs++] = (struct object_frame){ sc->n_refs, sc->keys_len };
	size_t brace = consumed(sc) - 1;
	if (level == 0)
		sc->info->brace = brace;
	else if (level == 1 && sc->slot == S_STREAM_OPTIONS) {
		sc->info->stream_options.is_object = true;
		sc->info->stream_options.open = brace;
	}
	return 1;
}

static int cb_end_map(void *ctx)
{
	struct scan *sc = ctx;

	if (!end_object_keys(sc))
		return 0;
	int level = --sc->depth;
	if (level == 0) {
		scope_close(&sc->top);
		sc->top_end = consumed(sc);
		sc->info->members = sc->top.members;
		sc->info->other_end = sc->top.has_kept ? sc->top.kept_end : 0;
	} else if (level == 1 && sc->slot == S_STREAM_OPTIONS) {
		struct fg_req_member *so = &sc->info->stream_options;
		so->close = consumed(sc) - 1;
		scope_close(&sc->so);
		if (sc->iu_cut.present) {
			so->has_iu = true;
			so->iu_from = sc->iu_cut.cut_from;
			so->iu_to = sc->iu_cut.cut_to;
		}
		so->other_end = sc->so.has_kept ? sc->so.kept_end : 0;
	}
	value_ended(sc, level);
	return 1;
}

static int cb_start_array(void *ctx)
{
	return on_value(ctx, V_ARRAY, 0, false, 0);
}

static int cb_end_array(void *ctx)
{
	struct scan *sc = ctx;
	int level = --sc->depth;

	if (level == 2 && sc->slot == S_PROMPT) {
		if (sc->inner_all_ints)
			sc->prompt_ids += sc->inner_items;
		else
			sc->prompt_bad = true;
	}
	value_ended(sc, level);
	return 1;
}

static const yajl_callbacks scan_callbacks = {
	.yajl_null = cb_null,
	.yajl_boolean = cb_boolean,
	.yajl_number = cb_number,
	.yajl_string = cb_string,
	.yajl_start_map = cb_start_map,
	.yajl_map_key = cb_map_key,
	.yajl_end_map = cb_end_map,
	.yajl_start_array = cb_start_array,
	.yajl_end_array = cb_end_array,
};

/* ---- after the pass: the members' meaning ---------------------------------------- */

/* An optional non-negative integer member; null counts as absent. */
static int opt_count(const struct scalar *v, uint64_t *out, bool *present)
{
	*present = false;
	if (v->type == V_NONE || v->type == V_NULL)
		return 0;
	if (v->type != V_INT || v->i < 0)
		return -1;
	*out = (uint64_t)v->i;
	*present = true;
	return 0;
}

#define FAIL(p, ...)                                          \
	do {                                                  \
		snprintf(msg, msglen, __VA_ARGS__);           \
		*param = (p);                                 \
		return -1;                                    \
	} while (0)

static int interpret(struct scan *sc, enum fg_api api, size_t len, char *msg, size_t msglen,
		     const char **param)
{
	struct fg_req_info *info = sc->info;
	struct fg_request_shape *s = &info->shape;
	bool present;
	uint64_t v;

	if (sc->not_object)
		FAIL(NULL, "the request body must be a JSON object");
	enum vtype model = sc->v[S_MODEL].type;
	if (model != V_NONE && model != V_STRING && model != V_NULL)
		FAIL("model", "'model' must be a string");
	if (model != V_STRING)
		info->model[0] = 0;

	if (api == FG_API_CHAT) {
		if (sc->v[S_MESSAGES].type != V_ARRAY || !sc->messages)
			FAIL("messages", "'messages' must be a non-empty array");
		if (sc->bad_message >= 0)
			FAIL("messages", "'messages[%lld]' must be an object", (long long)sc->bad_message);
		s->prompt_chars = sc->chat_chars;
	} else if (api == FG_API_COMPLETIONS || api == FG_API_EMBEDDINGS) {
		const char *key = api == FG_API_COMPLETIONS ? "prompt" : "input";
		enum vtype t = sc->v[S_PROMPT].type;
		bool ok = t == V_STRING;
		if (t == V_ARRAY && sc->prompt_items) {
			if (sc->prompt_ints == sc->prompt_items) {
				sc->prompt_chars = 0;
				sc->prompt_ids = sc->prompt_items; /* a flat list of token ids */
				ok = true;
			} else {
				ok = !sc->prompt_bad && !sc->prompt_ints;
			}
		}
		if (!ok)
			FAIL(key, "'%s' must be a string, an array of strings, or token ids", key);
		s->prompt_chars = sc->prompt_chars;
		s->prompt_token_ids = sc->prompt_ids;
		s->prompt_only = api == FG_API_EMBEDDINGS;
	} else {
		s->prompt_chars = len;
		s->prompt_only = true;
	}

	if (opt_count(&sc->v[S_MAX_COMPLETION], &v, &present))
		FAIL("max_completion_tokens", "'max_completion_tokens' must be a non-negative integer");
	if (present) {
		s->max_tokens = v;
	} else {
		if (opt_count(&sc->v[S_MAX_TOKENS], &v, &present))
			FAIL("max_tokens", "'max_tokens' must be a non-negative integer");
		if (present)
			s->max_tokens = v;
	}
	if (opt_count(&sc->v[S_N], &v, &present) || (present && (v < 1 || v > MAX_CHOICES)))
		FAIL("n", "'n' must be an integer between 1 and %d", MAX_CHOICES);
	s->n = present ? (uint32_t)v : 1;

	enum vtype st = sc->v[S_STREAM].type;
	if (st != V_NONE && st != V_BOOL && st != V_NULL)
		FAIL("stream", "'stream' must be a boolean");
	info->stream = st == V_BOOL && sc->v[S_STREAM].b;
	enum vtype so = sc->v[S_STREAM_OPTIONS].type;
	if (so != V_NONE && so != V_OBJECT && so != V_NULL)
		FAIL("stream_options", "'stream_options' must be an object");
	if (so == V_OBJECT) {
		enum vtype iu = sc->iu.type;
		if (iu != V_NONE && iu != V_BOOL && iu != V_NULL)
			FAIL("stream_options.include_usage", "'stream_options.include_usage' must be a boolean");
		info->client_wants_usage = iu == V_BOOL && sc->iu.b;
	}
	return 0;
}

static void scan_free(struct scan *sc)
{
	if (sc->h)
		yajl_free(sc->h);
	fg_arena_free(sc->arena, sc->keys);
	fg_arena_free(sc->arena, sc->refs);
	fg_arena_free(sc->arena, sc->objs);
	fg_arena_free(sc->arena, sc->num);
}

int fg_request_parse(enum fg_api api, const char *body, size_t len, struct fg_req_info *info,
		     char *msg, size_t msglen, const char **param)
{
	alignas(max_align_t) char mem[ARENA_BYTES];
	struct fg_arena arena;
	struct scan sc = { .body = body, .len = len, .api = api, .info = info, .bad_message = -1,
			   .arena = &arena };
	int rc = -1;

	fg_arena_init(&arena, mem, sizeof(mem));

	memset(info, 0, sizeof(*info));
	*param = NULL;
	if (!len)
		FAIL(NULL, "the request body is empty; expected a JSON object");
	size_t bad = utf8_bad_at((const unsigned char *)body, len);
	if (bad < len)
		FAIL(NULL, "the request body is not valid JSON: %s at offset %zu",
		     body[bad] ? "invalid UTF-8" : "NUL byte", bad);
	/* yajl takes \v and \f for whitespace; JSON has neither, and inside a
	 * string any raw control character is refused anyway */
	const char *ctl = memchr(body, '\f', len);
	if (!ctl)
		ctl = memchr(body, '\v', len);
	if (ctl)
		FAIL(NULL, "the request body is not valid JSON: control character 0x%02x at offset %zu",
		     *ctl, (size_t)(ctl - body));
	sc.h = yajl_alloc(&scan_callbacks, &arena.funcs, &sc);
	if (!sc.h) {
		snprintf(msg, msglen, "out of memory while reading the request");
		return -1;
	}
	yajl_status ys = yajl_parse(sc.h, (const unsigned char *)body, len);
	size_t at = yajl_get_bytes_consumed(sc.h);
	if (ys == yajl_status_ok)
		ys = yajl_complete_parse(sc.h), at = len;
	if (ys != yajl_status_ok) {
		if (sc.err) {
			snprintf(msg, msglen, "the request body is not valid JSON: %s (near offset %zu)",
				 sc.err, at);
		} else {
			unsigned char *e = yajl_get_error(sc.h, 0, NULL, 0);
			const char *text = e ? (const char *)e : "parse error";
			int tl = (int)strcspn(text, "\n");
			snprintf(msg, msglen, "the request body is not valid JSON: %.*s (near offset %zu)",
				 tl, text, at);
			if (e)
				yajl_free_error(sc.h, e);
		}
		goto out;
	}
	/* yajl lets an unfinished token after the value pass at EOF */
	if (!sc.not_object && !all_space(body + sc.top_end, len - sc.top_end)) {
		snprintf(msg, msglen, "the request body is not valid JSON: trailing garbage (near offset %zu)",
			 sc.top_end);
		goto out;
	}
	rc = interpret(&sc, api, len, msg, msglen, param);
out:
	scan_free(&sc);
	if (rc)
		memset(info, 0, sizeof(*info));
	return rc;
}

/* ---- the forwarded body ---------------------------------------------------------- */

struct cut {
	size_t from, to;
};

static int cut_cmp(const void *a, const void *b)
{
	const struct cut *x = a, *y = b;

	return (x->from > y->from) - (x->from < y->from);
}

/* Copy body[from, to) less the cuts (sorted, possibly overlapping). */
static size_t copy_less(char *out, const char *body, size_t from, size_t to, const struct cut *c,
			int n)
{
	size_t o = 0, at = from;

	for (int i = 0; i < n; i++) {
		if (c[i].to <= at)
			continue;
		if (c[i].from > at) {
			memcpy(out + o, body + at, c[i].from - at);
			o += c[i].from - at;
		}
		at = c[i].to;
	}
	if (to > at) {
		memcpy(out + o, body + at, to - at);
		o += to - at;
	}
	return o;
}

char *fg_request_forward_body(const struct fg_req_info *info, const char *body, size_t len,
			      const struct fg_rewrite *rw, size_t *out_len)
{
	const struct fg_req_member *so = &info->stream_options;
	bool carry_so = rw->force_usage && so->present;
	const struct fg_req_member *cut_members[3] = {
		&info->cache_salt, &info->priority, carry_so ? so : NULL,
	};
	/* where the last client member that stays ends (0: none stays) */
	size_t kept_end = info->other_end;
	if (so->present && !carry_so && so->value_end > kept_end)
		kept_end = so->value_end;
	struct cut cuts[3];
	int n = 0;
	for (int i = 0; i < 3; i++) {
		const struct fg_req_member *m = cut_members[i];
		if (!m || !m->present)
			continue;
		/* each cut takes the comma after its member; past the last member
		 * that stays, the comma after that one goes instead */
		size_t from = kept_end && m->cut_from > kept_end ? kept_end : m->cut_from;
		cuts[n++] = (struct cut){ from, m->cut_to };
	}
	qsort(cuts, (size_t)n, sizeof(cuts[0]), cut_cmp);
	bool others = kept_end != 0;

	/* the client's other stream_options members, carried into ours */
	size_t so_inner = carry_so && so->is_object ? so->close - so->open - 1 : 0;
	static const char iu[] = "\"stream_options\":{\"include_usage\":true";
	size_t salt_len = rw->cache_salt ? strlen(rw->cache_salt) : 0;
	size_t cap = 1 + (14 + salt_len + 2) + 24 + (sizeof(iu) + 1 + so_inner + 2) + len + 1;
	char *out = malloc(cap);
	if (!out)
		return NULL;
	size_t o = 0;
	out[o++] = '{';
	if (rw->cache_salt) {
		/* salts are [A-Za-z0-9._-] (agent/salt.c): no JSON escaping needed */
		memcpy(out + o, "\"cache_salt\":\"", 14), o += 14;
		memcpy(out + o, rw->cache_salt, salt_len), o += salt_len;
		out[o++] = '"', out[o++] = ',';
	}
	if (rw->set_priority)
		o += (size_t)snprintf(out + o, 24, "\"priority\":%d,", rw->priority);
	if (rw->force_usage) {
		memcpy(out + o, iu, sizeof(iu) - 1), o += sizeof(iu) - 1;
		if (so_inner) {
			size_t from = so->other_end && so->iu_from > so->other_end ? so->other_end
										    : so->iu_from;
			struct cut c = { from, so->iu_to };
			out[o++] = ',';
			size_t k = copy_less(out + o, body, so->open + 1, so->close, &c, so->has_iu);
			if (all_space(out + o, k))
				o--; /* nothing else was in it: no comma */
			else
				o += k;
		}
		out[o++] = '}', out[o++] = ',';
	}
	if (!others && o > 1)
		o--; /* the client's object keeps no member: no comma after ours */
	o += copy_less(out + o, body, info->brace + 1, len, cuts, n);
	out[o] = 0;
	*out_len = o;
	return out;
}
