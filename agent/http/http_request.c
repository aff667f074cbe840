/* http_request.c — validate, measure and rewrite request bodies in one
 * streaming pass; see http_request.h.
 *
 * lib/json_tok.c tokenises as the body arrives and checks the grammar,
 * strict UTF-8, NUL and escapes in the same pass; this file adds what a
 * body must also be to reach the engine (the rules it was held to when a
 * jansson tree was built: numbers in range, depth <= 2048, no duplicate
 * keys anywhere) and records, as the tokens go by, only what admission and
 * the rewrite need. A 1 MiB prompt costs about a copy of its bytes. A body
 * it refuses is read again by the reference reader (yajl, through the same
 * callbacks), which words the refusal as it always was.
 *
 * What the tokenizer sees is counted where it is: message contents, tool
 * definitions, instructions; a content part by its type (text parts by
 * their text, image and audio parts as one each, whatever their data URL
 * holds); a message's role and a part's type are the template's, counted
 * by the policy's framing, not as text. */
#include <errno.h>
#include <math.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>

#include "agent/http/http_request.h"
#include "lib/json_number.h"
#include "lib/json_tok.h"
#include "lib/yajl_arena.h"

#define MAX_CHOICES 128     /* OpenAI's own limit on n */
#define MAX_DEPTH 2048      /* jansson's limit, which bodies were held to before */
#define SMALL_OBJECT 8      /* keys compared one by one; larger objects sorted */
#define ARENA_BYTES 8192    /* yajl and the key tables of a typical body: no malloc */

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
		unsigned lo, hi;
		size_t n = fg_utf8_lead(c, &lo, &hi);
		if (!n)
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
enum slot { S_OTHER = 0, S_MODEL, S_MESSAGES, S_TOOLS, S_PROMPT, S_INPUT, S_INSTRUCTIONS,
	    S_TOKENS, S_MAX_COMPLETION, S_MAX_TOKENS, S_MAX_OUTPUT, S_N, S_BEST_OF, S_BEAM,
	    S_STREAM, S_STREAM_OPTIONS, S_CACHE_SALT, S_PRIORITY, S_PREVIOUS_RESPONSE,
	    S_BACKGROUND, S_PROMPT_TEMPLATE, S_CONVERSATION, S_ADD_GENERATION, S_CONTINUE_FINAL,
	    S_CHAT_TEMPLATE, S_TEMPLATE_KWARGS, S_ADD_SPECIAL, S_MM_KWARGS, S_NSLOTS };

/* A member of a message (or responses input item), and of a content part. */
enum msg_key { MK_OTHER = 0, MK_ROLE, MK_TYPE, MK_CONTENT };
enum part_key { PK_OTHER = 0, PK_TYPE, PK_TEXT };
enum part_kind { PART_UNKNOWN = 0, PART_TEXT, PART_IMAGE, PART_AUDIO, PART_VIDEO, PART_FILE };

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
	const char *body;           /* the body so far: it may move between reads */
	size_t len;
	size_t pos;                 /* where the token just read ends */
	size_t tok_start;           /* ... and where it starts (keys) */
	size_t base;                /* yajl: offset of the bytes it is reading now */
	yajl_handle h;              /* the reference reader (yajl), or NULL */
	enum fg_api api;
	struct fg_req_info *info;
	const char *err;            /* a static message, or NULL: see err_buf */
	char err_buf[160];

	int depth;                  /* open containers */
	size_t top_end;             /* where the top-level object ends */
	bool not_object;
	enum slot slot;             /* of the current top-level member */
	size_t key_start;           /* of the current top-level member */
	enum msg_key mkey;          /* of the current message member (level 3) */
	enum part_key pkey;         /* of the current content part member (level 5) */
	bool in_content;            /* inside a message's content array */
	enum part_kind part;        /* the current content part, by its type */
	uint64_t part_text, part_other; /* its text, and its other strings */
	int so_key;                 /* inside stream_options: 1 include_usage, 2 continuous */

	struct scalar v[S_NSLOTS];  /* the top-level members' types and scalars */
	uint64_t items, chat_chars; /* messages / input items, and their text */
	uint32_t images, audios, videos, files;
	int64_t bad_message;        /* first item that is not an object */
	uint64_t prompt_items, prompt_ints, prompt_chars, prompt_ids;
	uint64_t longest_chars, longest_ids;
	bool prompt_bad, inner_all_ints;
	uint64_t inner_items;
	uint64_t token_items;       /* detokenize: tokens[] */
	bool tokens_bad;
	struct scalar iu, cus;      /* stream_options.include_usage, .continuous_usage_stats */
	struct fg_req_member iu_cut, cus_cut; /* and where they sit */

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
	char *dec;                  /* an escaped string's decoded text */
	size_t dec_cap;
};
static int fail_with(struct scan *sc, const char *why)
{
	sc->err = why;
	return 0; /* yajl: cancel */
}

/* Offset in the body where the token just read ends. */
static size_t consumed(const struct scan *sc)
{
	return sc->pos;
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

static bool is_items_slot(enum slot s)
{
	return s == S_MESSAGES || s == S_INPUT;
}

static enum part_kind part_kind_of(const unsigned char *s, size_t l)
{
	static const struct { const char *name; enum part_kind kind; } kinds[] = {
		{ "text", PART_TEXT }, { "input_text", PART_TEXT }, { "output_text", PART_TEXT },
		{ "refusal", PART_TEXT },
		{ "image_url", PART_IMAGE }, { "input_image", PART_IMAGE }, { "image", PART_IMAGE },
		{ "image_pil", PART_IMAGE }, { "image_embeds", PART_IMAGE },
		{ "input_audio", PART_AUDIO }, { "audio_url", PART_AUDIO }, { "audio", PART_AUDIO },
		{ "audio_embeds", PART_AUDIO },
		{ "video_url", PART_VIDEO }, { "video", PART_VIDEO }, { "input_video", PART_VIDEO },
		{ "file", PART_FILE }, { "input_file", PART_FILE },
	};

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (strlen(kinds[i].name) == l && !memcmp(kinds[i].name, s, l))
			return kinds[i].kind;
	return PART_UNKNOWN;
}

/* A string inside messages[] / input[] at `level`. */
static void item_string(struct scan *sc, int level, const unsigned char *s, size_t l)
{
	if (level == 2) {
		sc->chat_chars += l; /* not an object: refused later, counted anyway */
		return;
	}
	if (level == 3) {
		if (sc->mkey != MK_ROLE && sc->mkey != MK_TYPE)
			sc->chat_chars += l; /* content as a string, name, arguments... */
		return;
	}
	if (!sc->in_content || level == 4) {
		sc->chat_chars += l; /* tool calls and the like */
		return;
	}
	if (level == 5 && sc->pkey == PK_TYPE)
		sc->part = part_kind_of(s, l);
	else if (level == 5 && sc->pkey == PK_TEXT)
		sc->part_text += l;
	else
		sc->part_other += l; /* an image's URL, an audio clip's data */
}

/* A content part has ended: it counts by its type. */
static void part_done(struct scan *sc)
{
	switch (sc->part) {
	case PART_TEXT:
		sc->chat_chars += sc->part_text;
		break;
	case PART_IMAGE:
		sc->images++;
		break;
	case PART_AUDIO:
		sc->audios++;
		break;
	case PART_VIDEO:
		sc->videos++;
		break;
	case PART_FILE:
		sc->files++;
		break;
	case PART_UNKNOWN:
		sc->chat_chars += sc->part_text + sc->part_other;
		break;
	}
	sc->part = PART_UNKNOWN;
	sc->part_text = sc->part_other = 0;
}

/* A value starts (scalars: and ends) at nesting level sc->depth. */
static int on_value(struct scan *sc, enum vtype t, const unsigned char *str, size_t slen, bool b,
		    long long i)
{
	int level = sc->depth;
	struct scalar sv = { t, b, i };

	if (level == 0)
		sc->not_object = t != V_OBJECT;
	else if (level == 1) {
		sc->v[sc->slot] = sv;
		if (sc->slot == S_PROMPT && t == V_STRING)
			sc->prompt_chars = sc->longest_chars = slen;
	}
	switch (level ? sc->slot : S_OTHER) {
	case S_MESSAGES:
	case S_INPUT:
		if (level == 1) {
			if (t == V_STRING) /* responses: one user message */
				sc->chat_chars += slen, sc->items = 1;
			break;
		}
		if (level == 2) {
			if (t != V_OBJECT && sc->bad_message < 0)
				sc->bad_message = (int64_t)sc->items;
			sc->items++;
		}
		if (level == 3 && sc->mkey == MK_CONTENT && t == V_ARRAY)
			sc->in_content = true;
		if (level == 4 && sc->in_content && t == V_OBJECT)
			sc->part = PART_UNKNOWN, sc->part_text = sc->part_other = 0;
		if (t == V_STRING)
			item_string(sc, level, str, slen);
		break;
	case S_INSTRUCTIONS:
		if (level == 1 && t == V_STRING)
			sc->chat_chars += slen;
		break;
	case S_TOOLS:
		if (t == V_STRING)
			sc->chat_chars += slen;
		break;
	case S_PROMPT:
		if (level == 2) {
			sc->prompt_items++;
			if (t == V_INT) {
				sc->prompt_ints++;
			} else if (t == V_STRING) {
				sc->prompt_chars += slen;
				if (slen > sc->longest_chars)
					sc->longest_chars = slen;
			} else if (t == V_ARRAY) {
				sc->inner_all_ints = true, sc->inner_items = 0;
			} else {
				sc->prompt_bad = true;
			}
		} else if (level == 3) {
			sc->inner_items++;
			if (t != V_INT)
				sc->inner_all_ints = false;
		}
		break;
	case S_TOKENS:
		if (level == 2) {
			sc->token_items++;
			if (t != V_INT || i < 0)
				sc->tokens_bad = true;
		}
		break;
	case S_STREAM_OPTIONS:
		if (level == 2 && sc->so_key == 1)
			sc->iu = sv;
		else if (level == 2 && sc->so_key == 2)
			sc->cus = sv;
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
	if (level == 1) {
		size_t end = consumed(sc);
		scope_value_end(&sc->top, end);
		/* the members a /tokenize body copies, by slot (0: none; else m + 1) */
		static const uint8_t tok[S_NSLOTS] = {
			[S_MODEL] = FG_TM_MODEL + 1, [S_MESSAGES] = FG_TM_MESSAGES + 1,
			[S_TOOLS] = FG_TM_TOOLS + 1, [S_PROMPT] = FG_TM_PROMPT + 1,
			[S_INPUT] = FG_TM_PROMPT + 1, [S_ADD_GENERATION] = FG_TM_ADD_GENERATION + 1,
			[S_CONTINUE_FINAL] = FG_TM_CONTINUE_FINAL + 1,
			[S_CHAT_TEMPLATE] = FG_TM_CHAT_TEMPLATE + 1,
			[S_TEMPLATE_KWARGS] = FG_TM_TEMPLATE_KWARGS + 1,
			[S_ADD_SPECIAL] = FG_TM_ADD_SPECIAL + 1, [S_MM_KWARGS] = FG_TM_MM_KWARGS + 1,
			[S_INSTRUCTIONS] = FG_TM_INSTRUCTIONS + 1,
		};
		if (tok[sc->slot])
			sc->info->tok[tok[sc->slot] - 1] = (struct fg_span){ sc->key_start, end };
	} else if (level == 2 && sc->slot == S_STREAM_OPTIONS &&
		   sc->v[S_STREAM_OPTIONS].type == V_OBJECT) {
		scope_value_end(&sc->so, consumed(sc));
	}
}

static int cb_null(void *ctx)
{
	struct scan *sc = ctx;

	if (!on_value(sc, V_NULL, NULL, 0, false, 0))
		return 0;
	value_ended(sc, sc->depth);
	return 1;
}

static int cb_boolean(void *ctx, int b)
{
	struct scan *sc = ctx;

	if (!on_value(sc, V_BOOL, NULL, 0, b, 0))
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
	if (!on_value(sc, kind == FG_JSON_REAL ? V_REAL : V_INT, NULL, 0, false, i))
		return 0;
	value_ended(sc, sc->depth);
	return 1;
}

/* s: the string's decoded bytes, where string_text_wanted says they are read
 * (else possibly NULL); l: their count. */
static int cb_string(void *ctx, const unsigned char *s, size_t l)
{
	struct scan *sc = ctx;

	if (!on_value(sc, V_STRING, s, l, false, 0))
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

/* inline: the name is a literal, so strlen folds to a constant */
static inline bool key_is(const unsigned char *s, size_t l, const char *name)
{
	return strlen(name) == l && !memcmp(s, name, l);
}

#define NAME(lit, slot) { lit, sizeof(lit) - 1, slot }
static enum slot slot_of(const struct scan *sc, const unsigned char *s, size_t l)
{
	static const struct { const char *name; size_t len; enum slot slot; } names[] = {
		NAME("model", S_MODEL),
		NAME("tools", S_TOOLS),
		NAME("max_completion_tokens", S_MAX_COMPLETION),
		NAME("max_tokens", S_MAX_TOKENS),
		NAME("max_output_tokens", S_MAX_OUTPUT),
		NAME("n", S_N),
		NAME("best_of", S_BEST_OF),
		NAME("use_beam_search", S_BEAM),
		NAME("stream", S_STREAM),
		NAME("stream_options", S_STREAM_OPTIONS),
		NAME("instructions", S_INSTRUCTIONS),
		NAME("previous_response_id", S_PREVIOUS_RESPONSE),
		NAME("background", S_BACKGROUND),
		NAME("conversation", S_CONVERSATION),
		NAME("add_generation_prompt", S_ADD_GENERATION),
		NAME("continue_final_message", S_CONTINUE_FINAL),
		NAME("chat_template", S_CHAT_TEMPLATE),
		NAME("chat_template_kwargs", S_TEMPLATE_KWARGS),
		NAME("add_special_tokens", S_ADD_SPECIAL),
		NAME("mm_processor_kwargs", S_MM_KWARGS),
		NAME("tokens", S_TOKENS),
	};

	if (key_is(s, l, "cache_salt"))
		return S_CACHE_SALT;
	if (key_is(s, l, "priority"))
		return S_PRIORITY;
	if (sc->api == FG_API_PASSTHROUGH)
		return S_OTHER; /* only salt and priority matter there */
	if (key_is(s, l, "messages"))
		return sc->api == FG_API_COMPLETIONS || sc->api == FG_API_RESPONSES ||
		       sc->api == FG_API_DETOKENIZE ? S_OTHER : S_MESSAGES;
	if (key_is(s, l, "prompt"))
		return sc->api == FG_API_RESPONSES ? S_PROMPT_TEMPLATE
		       : sc->api == FG_API_COMPLETIONS || sc->api == FG_API_TOKENIZE ? S_PROMPT
										   : S_OTHER;
	if (key_is(s, l, "input"))
		return sc->api == FG_API_RESPONSES ? S_INPUT
		       : sc->api == FG_API_EMBEDDINGS ? S_PROMPT : S_OTHER;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].len == l && !memcmp(names[i].name, s, l))
			return names[i].slot;
	return S_OTHER;
}
#undef NAME

static enum msg_key msg_key_of(const unsigned char *s, size_t l)
{
	return key_is(s, l, "role") ? MK_ROLE : key_is(s, l, "type") ? MK_TYPE
	       : key_is(s, l, "content") ? MK_CONTENT : MK_OTHER;
}

/* A key (decoded) starting at sc->tok_start. */
static int cb_map_key(void *ctx, const unsigned char *s, size_t l)
{
	struct scan *sc = ctx;

	if (!add_key(sc, s, l))
		return 0;
	if (sc->depth == 1) {
		sc->slot = slot_of(sc, s, l);
		struct fg_req_info *in = sc->info;
		struct fg_req_member *tracked =
			sc->slot == S_CACHE_SALT ? &in->cache_salt
			: sc->slot == S_PRIORITY ? &in->priority
			: sc->slot == S_STREAM_OPTIONS ? &in->stream_options
			: sc->slot == S_MAX_TOKENS ? &in->max_tokens
			: sc->slot == S_MAX_COMPLETION ? &in->max_completion_tokens
			: sc->slot == S_MAX_OUTPUT ? &in->max_output_tokens : NULL;
		sc->key_start = sc->tok_start;
		scope_key(&sc->top, sc->key_start, tracked);
	} else if (sc->depth == 2 && sc->slot == S_STREAM_OPTIONS) {
		sc->so_key = key_is(s, l, "include_usage") ? 1
			     : key_is(s, l, "continuous_usage_stats") ? 2 : 0;
		scope_key(&sc->so, sc->tok_start,
			  sc->so_key == 1 ? &sc->iu_cut : sc->so_key == 2 ? &sc->cus_cut : NULL);
	} else if (sc->depth == 3 && is_items_slot(sc->slot)) {
		sc->mkey = msg_key_of(s, l);
	} else if (sc->depth == 5 && is_items_slot(sc->slot) && sc->in_content) {
		sc->pkey = key_is(s, l, "type") ? PK_TYPE : key_is(s, l, "text") ? PK_TEXT : PK_OTHER;
	}
	return 1;
}

static int cb_start_map(void *ctx)
{
	struct scan *sc = ctx;
	int level = sc->depth;

	if (!on_value(sc, V_OBJECT, NULL, 0, false, 0))
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
	} else if (level == 2 && is_items_slot(sc->slot)) {
		sc->mkey = MK_OTHER;
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
		struct fg_req_info *in = sc->info;
		in->stream_options.close = consumed(sc) - 1;
		scope_close(&sc->so);
		in->include_usage = (struct fg_inner_member){ sc->iu_cut.present, sc->iu_cut.cut_from,
							      sc->iu_cut.cut_to };
		in->continuous_usage = (struct fg_inner_member){ sc->cus_cut.present,
								 sc->cus_cut.cut_from,
								 sc->cus_cut.cut_to };
		in->so_kept_end = sc->so.has_kept ? sc->so.kept_end : 0;
	} else if (level == 4 && is_items_slot(sc->slot) && sc->in_content) {
		part_done(sc);
	}
	value_ended(sc, level);
	return 1;
}

static int cb_start_array(void *ctx)
{
	return on_value(ctx, V_ARRAY, NULL, 0, false, 0);
}

static int cb_end_array(void *ctx)
{
	struct scan *sc = ctx;
	int level = --sc->depth;

	if (level == 2 && sc->slot == S_PROMPT) {
		if (sc->inner_all_ints) {
			sc->prompt_ids += sc->inner_items;
			if (sc->inner_items > sc->longest_ids)
				sc->longest_ids = sc->inner_items;
		} else {
			sc->prompt_bad = true;
		}
	} else if (level == 3 && is_items_slot(sc->slot)) {
		sc->in_content = false;
	}
	value_ended(sc, level);
	return 1;
}

/* Whether the string value about to be read is one whose text counts (the
 * model, a content part's type), not only its length. */
static bool string_text_wanted(const struct scan *sc)
{
	return (sc->depth == 1 && sc->slot == S_MODEL) ||
	       (sc->depth == 5 && is_items_slot(sc->slot) && sc->in_content && sc->pkey == PK_TYPE);
}

/* ---- the reference reader: yajl drives the same callbacks ---- */

static struct scan *yajl_at(void *ctx)
{
	struct scan *sc = ctx;

	sc->pos = sc->base + yajl_get_bytes_consumed(sc->h);
	return sc;
}

static int y_null(void *ctx) { return cb_null(yajl_at(ctx)); }
static int y_boolean(void *ctx, int b) { return cb_boolean(yajl_at(ctx), b); }
static int y_number(void *ctx, const char *s, size_t l) { return cb_number(yajl_at(ctx), s, l); }
static int y_start_map(void *ctx) { return cb_start_map(yajl_at(ctx)); }
static int y_end_map(void *ctx) { return cb_end_map(yajl_at(ctx)); }
static int y_start_array(void *ctx) { return cb_start_array(yajl_at(ctx)); }
static int y_end_array(void *ctx) { return cb_end_array(yajl_at(ctx)); }

static int y_string(void *ctx, const unsigned char *s, size_t l)
{
	struct scan *sc = yajl_at(ctx);

	if (!in_body(sc, s) && !check_escapes(sc))
		return 0;
	return cb_string(sc, s, l);
}

static int y_map_key(void *ctx, const unsigned char *s, size_t l)
{
	struct scan *sc = yajl_at(ctx);

	if (!in_body(sc, s) && !check_escapes(sc))
		return 0;
	if (memchr(s, 0, l))
		return fail_with(sc, "\\u0000 is not allowed in a string");
	sc->tok_start = open_quote(sc->body, consumed(sc) - 1);
	return cb_map_key(sc, s, l);
}

static const yajl_callbacks scan_callbacks = {
	.yajl_null = y_null,
	.yajl_boolean = y_boolean,
	.yajl_number = y_number,
	.yajl_string = y_string,
	.yajl_start_map = y_start_map,
	.yajl_map_key = y_map_key,
	.yajl_end_map = y_end_map,
	.yajl_start_array = y_start_array,
	.yajl_end_array = y_end_array,
};

/* ---- the fast reader: lib/json_tok.c drives them ---- */

/* The decoded text of an escaped string (rare: keys and the few values
 * whose text counts), in the scan's scratch buffer. */
static const unsigned char *unescaped(struct scan *sc, const char *text,
				      const struct fg_jt_token *t)
{
	size_t raw = t->end - t->start - 2;

	if (raw > sc->dec_cap) {
		char *d = fg_arena_realloc(sc->arena, sc->dec, raw);
		if (!d)
			return NULL;
		sc->dec = d;
		sc->dec_cap = raw;
	}
	fg_jt_unescape(text + t->start + 1, raw, sc->dec);
	return (const unsigned char *)sc->dec;
}

static int jt_token(void *ctx, const char *text, const struct fg_jt_token *t)
{
	struct scan *sc = ctx;
	const unsigned char *s;

	sc->pos = t->end;
	switch (t->kind) {
	case FG_JT_NULL:
		return cb_null(sc);
	case FG_JT_TRUE:
	case FG_JT_FALSE:
		return cb_boolean(sc, t->kind == FG_JT_TRUE);
	case FG_JT_NUMBER:
		return cb_number(sc, text + t->start, t->end - t->start);
	case FG_JT_STRING:
	case FG_JT_KEY:
		s = (const unsigned char *)text + t->start + 1;
		if (t->escaped && (t->kind == FG_JT_KEY || string_text_wanted(sc)) &&
		    !(s = unescaped(sc, text, t)))
			return fail_with(sc, "out of memory");
		if (t->kind == FG_JT_STRING)
			return cb_string(sc, s, t->decoded_len);
		sc->tok_start = t->start;
		return cb_map_key(sc, s, t->decoded_len);
	case FG_JT_START_MAP:
		return cb_start_map(sc);
	case FG_JT_END_MAP:
		return cb_end_map(sc);
	case FG_JT_START_ARRAY:
		return cb_start_array(sc);
	case FG_JT_END_ARRAY:
		return cb_end_array(sc);
	}
	return 0;
}
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

static bool given(const struct scalar *v)
{
	return v->type != V_NONE && v->type != V_NULL;
}

#define FAIL(p, ...)                                          \
	do {                                                  \
		snprintf(msg, msglen, __VA_ARGS__);           \
		*param = (p);                                 \
		return -1;                                    \
	} while (0)

/* A completions prompt, an embeddings input or a tokenize prompt. */
static int read_prompt(struct scan *sc, const char *key, char *msg, size_t msglen,
		       const char **param)
{
	struct fg_request_shape *s = &sc->info->shape;
	enum vtype t = sc->v[S_PROMPT].type;
	bool ok = t == V_STRING;

	s->prompts = 1;
	if (t == V_ARRAY && sc->prompt_items) {
		if (sc->prompt_ints == sc->prompt_items) {
			sc->prompt_chars = sc->longest_chars = 0;
			sc->prompt_ids = sc->longest_ids = sc->prompt_items; /* one prompt of token ids */
			ok = true;
		} else {
			/* several prompts: the engine runs each as its own sequence */
			ok = !sc->prompt_bad && !sc->prompt_ints;
			s->prompts = (uint32_t)(sc->prompt_items < UINT32_MAX ? sc->prompt_items
									  : UINT32_MAX);
		}
	}
	if (!ok)
		FAIL(key, "'%s' must be a string, an array of strings, or token ids", key);
	s->prompt_chars = sc->prompt_chars;
	s->prompt_token_ids = sc->prompt_ids;
	s->longest_chars = sc->longest_chars;
	s->longest_token_ids = sc->longest_ids;
	return 0;
}

/* Chat messages or responses input items: one sequence, framed. */
static int read_items(struct scan *sc, const char *key, char *msg, size_t msglen,
		      const char **param)
{
	struct fg_request_shape *s = &sc->info->shape;

	if (sc->bad_message >= 0)
		FAIL(key, "'%s[%lld]' must be an object", key, (long long)sc->bad_message);
	s->prompt_chars = sc->chat_chars;
	s->messages = (uint32_t)(sc->items < UINT32_MAX ? sc->items : UINT32_MAX);
	s->chat = true;
	s->prompts = 1;
	return 0;
}

static int read_caps(struct scan *sc, enum fg_api api, char *msg, size_t msglen,
		     const char **param)
{
	struct fg_request_shape *s = &sc->info->shape;
	static const struct { enum slot slot; const char *name; } caps[] = {
		{ S_MAX_COMPLETION, "max_completion_tokens" },
		{ S_MAX_TOKENS, "max_tokens" },
		{ S_MAX_OUTPUT, "max_output_tokens" },
	};
	bool present;
	uint64_t v;

	for (size_t k = 0; k < sizeof(caps) / sizeof(caps[0]); k++) {
		/* the cap each API's engine reads: chat takes max_completion_tokens
		 * over max_tokens, completions max_tokens, responses max_output_tokens */
		bool read = api == FG_API_CHAT ? caps[k].slot != S_MAX_OUTPUT
			    : api == FG_API_COMPLETIONS ? caps[k].slot == S_MAX_TOKENS
			    : caps[k].slot == S_MAX_OUTPUT;
		if (!read)
			continue;
		if (opt_count(&sc->v[caps[k].slot], &v, &present) || (present && v < 1))
			FAIL(caps[k].name, "'%s' must be an integer of at least 1", caps[k].name);
		if (present && !s->max_tokens)
			s->max_tokens = v;
	}
	return 0;
}

static int read_choices(struct scan *sc, char *msg, size_t msglen, const char **param)
{
	struct fg_request_shape *s = &sc->info->shape;
	const struct scalar *best_of = &sc->v[S_BEST_OF], *beam = &sc->v[S_BEAM];
	bool present;
	uint64_t v;

	if (opt_count(&sc->v[S_N], &v, &present) || (present && (v < 1 || v > MAX_CHOICES)))
		FAIL("n", "'n' must be an integer between 1 and %d", MAX_CHOICES);
	s->n = present ? (uint32_t)v : 1;
	/* vLLM's V1 engine refuses best_of other than 1; priced as the engine
	 * would run it, such a request is refused here, before the engine */
	if (given(best_of) && (best_of->type != V_INT || best_of->i != 1))
		FAIL("best_of", "'best_of' other than 1 is not supported (the engine does not run it); use 'n'");
	if (given(beam) && (beam->type != V_BOOL || beam->b))
		FAIL("use_beam_search", "'use_beam_search' is not supported through this gateway: beam search runs candidate sequences it cannot price");
	return 0;
}

static int read_stream(struct scan *sc, enum fg_api api, char *msg, size_t msglen,
		       const char **param)
{
	struct fg_req_info *info = sc->info;
	enum vtype st = sc->v[S_STREAM].type;

	if (st != V_NONE && st != V_BOOL && st != V_NULL)
		FAIL("stream", "'stream' must be a boolean");
	info->stream = st == V_BOOL && sc->v[S_STREAM].b;
	if (api == FG_API_RESPONSES)
		return 0; /* its events always end with the usage */
	enum vtype so = sc->v[S_STREAM_OPTIONS].type;
	if (so != V_NONE && so != V_OBJECT && so != V_NULL)
		FAIL("stream_options", "'stream_options' must be an object");
	if (so == V_OBJECT) {
		enum vtype iu = sc->iu.type, cus = sc->cus.type;
		if (iu != V_NONE && iu != V_BOOL && iu != V_NULL)
			FAIL("stream_options.include_usage", "'stream_options.include_usage' must be a boolean");
		if (cus != V_NONE && cus != V_BOOL && cus != V_NULL)
			FAIL("stream_options.continuous_usage_stats",
			     "'stream_options.continuous_usage_stats' must be a boolean");
		info->client_wants_usage = iu == V_BOOL && sc->iu.b;
		info->client_wants_continuous = cus == V_BOOL && sc->cus.b;
	}
	return 0;
}

/* Responses members whose prompt is not in the request: refused, since the
 * gateway could not price (or bound) what the engine would then run. */
static int read_responses(struct scan *sc, char *msg, size_t msglen, const char **param)
{
	struct fg_req_info *info = sc->info;
	enum vtype in = sc->v[S_INPUT].type, ins = sc->v[S_INSTRUCTIONS].type;

	if (given(&sc->v[S_PREVIOUS_RESPONSE]))
		FAIL("previous_response_id", "'previous_response_id' is not supported through this gateway: the conversation it continues is not in the request, so it cannot be priced; send it in 'input'");
	if (given(&sc->v[S_CONVERSATION]))
		FAIL("conversation", "'conversation' is not supported through this gateway: send the conversation in 'input'");
	if (given(&sc->v[S_PROMPT_TEMPLATE]))
		FAIL("prompt", "'prompt' (a stored prompt template) is not supported through this gateway: send the text in 'input'");
	if (given(&sc->v[S_BACKGROUND]) && (sc->v[S_BACKGROUND].type != V_BOOL || sc->v[S_BACKGROUND].b))
		FAIL("background", "'background' responses are not supported through this gateway");
	if (!(in == V_STRING || (in == V_ARRAY && sc->items)))
		FAIL("input", "'input' must be a string or a non-empty array of input items");
	if (ins != V_NONE && ins != V_NULL && ins != V_STRING)
		FAIL("instructions", "'instructions' must be a string");
	info->input_is_string = in == V_STRING;
	if (read_items(sc, "input", msg, msglen, param))
		return -1;
	if (ins == V_STRING)
		info->shape.messages++; /* a system message */
	return 0;
}

static int interpret(struct scan *sc, enum fg_api api, char *msg, size_t msglen,
		     const char **param)
{
	struct fg_req_info *info = sc->info;
	struct fg_request_shape *s = &info->shape;

	info->api = api;
	if (sc->not_object)
		FAIL(NULL, "the request body must be a JSON object");
	enum vtype model = sc->v[S_MODEL].type;
	if (model != V_NONE && model != V_STRING && model != V_NULL)
		FAIL("model", "'model' must be a string");
	if (model != V_STRING)
		info->model[0] = 0;
	bool messages = sc->v[S_MESSAGES].type == V_ARRAY;

	switch (api) {
	case FG_API_PASSTHROUGH:
		return 0; /* priced by the policy's entry, not by its body */
	case FG_API_CHAT:
		if (!messages || !sc->items)
			FAIL("messages", "'messages' must be a non-empty array");
		if (read_items(sc, "messages", msg, msglen, param))
			return -1;
		break;
	case FG_API_COMPLETIONS:
		if (read_prompt(sc, "prompt", msg, msglen, param))
			return -1;
		break;
	case FG_API_EMBEDDINGS:
	case FG_API_TOKENIZE:
		/* vLLM takes a chat-shaped body here too */
		if (messages && sc->v[S_PROMPT].type == V_NONE) {
			if (!sc->items)
				FAIL("messages", "'messages' must be a non-empty array");
			if (read_items(sc, "messages", msg, msglen, param))
				return -1;
		} else if (read_prompt(sc, api == FG_API_EMBEDDINGS ? "input" : "prompt", msg, msglen,
				       param)) {
			return -1;
		}
		s->prompt_only = true;
		s->no_gpu = api == FG_API_TOKENIZE;
		return 0;
	case FG_API_DETOKENIZE:
		if (sc->v[S_TOKENS].type != V_ARRAY || sc->tokens_bad)
			FAIL("tokens", "'tokens' must be an array of token ids");
		s->prompt_token_ids = sc->token_items;
		s->prompt_only = s->no_gpu = true;
		return 0;
	case FG_API_RESPONSES:
		if (read_responses(sc, msg, msglen, param))
			return -1;
		break;
	case FG_API_NONE:
		return 0;
	}
	s->images = sc->images;
	s->audios = sc->audios;
	info->videos = sc->videos;
	info->files = sc->files;
	if (read_caps(sc, api, msg, msglen, param))
		return -1;
	if (api != FG_API_RESPONSES && read_choices(sc, msg, msglen, param))
		return -1;
	if (api == FG_API_RESPONSES)
		s->n = 1;
	return read_stream(sc, api, msg, msglen, param);
}

static void scan_free(struct scan *sc)
{
	if (sc->h)
		yajl_free(sc->h);
	sc->h = NULL;
	fg_arena_free(sc->arena, sc->keys);
	fg_arena_free(sc->arena, sc->refs);
	fg_arena_free(sc->arena, sc->objs);
	fg_arena_free(sc->arena, sc->num);
	fg_arena_free(sc->arena, sc->dec);
	sc->keys = sc->num = sc->dec = NULL;
	sc->refs = NULL;
	sc->objs = NULL;
}

static void scan_reset(struct scan *sc, struct fg_arena *arena, enum fg_api api,
		       struct fg_req_info *info)
{
	memset(sc, 0, sizeof(*sc));
	sc->api = api;
	sc->info = info;
	sc->bad_message = -1;
	sc->arena = arena;
	memset(info, 0, sizeof(*info));
}

/* ---- the reference reader: yajl over the whole body ------------------------------ */

/* What the body check was before lib/json_tok.c: strict UTF-8 and no \f or
 * \v over the whole body, then yajl, each failure worded its own way. A
 * body the fast reader does not accept is read again here (only bad bodies
 * pay), so every refusal is worded, and placed, as it always was. */
int fg_request_parse_reference(enum fg_api api, const char *body, size_t len,
			       struct fg_req_info *info, char *msg, size_t msglen, const char **param)
{
	alignas(max_align_t) char mem[ARENA_BYTES];
	struct fg_arena arena;
	struct scan sc;
	int rc = -1;

	*param = NULL;
	fg_arena_init(&arena, mem, sizeof(mem));
	scan_reset(&sc, &arena, api, info);
	sc.body = body;
	sc.len = len;
	if (!len) {
		snprintf(msg, msglen, "the request body is empty; expected a JSON object");
		goto out;
	}
	size_t bad = utf8_bad_at((const unsigned char *)body, len);
	if (bad < len) {
		snprintf(msg, msglen, "the request body is not valid JSON: %s at offset %zu",
			 body[bad] ? "invalid UTF-8" : "NUL byte", bad);
		goto out;
	}
	/* yajl takes \v and \f for whitespace; JSON has neither, and inside a
	 * string any raw control character is refused anyway */
	const char *ctl = memchr(body, '\f', len);
	if (!ctl)
		ctl = memchr(body, '\v', len);
	if (ctl) {
		snprintf(msg, msglen,
			 "the request body is not valid JSON: control character 0x%02x at offset %zu",
			 *ctl, (size_t)(ctl - body));
		goto out;
	}
	if (!(sc.h = yajl_alloc(&scan_callbacks, &arena.funcs, &sc))) {
		snprintf(msg, msglen, "out of memory while reading the request");
		goto out;
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
	rc = interpret(&sc, api, msg, msglen, param);
out:
	scan_free(&sc);
	if (rc)
		memset(info, 0, sizeof(*info));
	return rc;
}

/* ---- the fast reader, read by read ------------------------------------------------ */

/* lib/json_tok.c reads each byte once as it arrives (a token cut by a read
 * is carried on) and drives the callbacks above; whatever it or they refuse
 * goes to the reference reader at the end, for its words. What it accepts
 * the reference accepts with the same fg_req_info (test_request_scan and
 * fuzz_request_json hold them to it), so where the reads fall changes
 * nothing. */
struct fg_req_scan {
	struct scan sc;
	struct fg_jt jt;
	bool failed;                /* the tokenizer or a callback said no */
	struct fg_arena arena;
	struct fg_req_info info;    /* filled as the tokens go by; copied out at the end */
	alignas(max_align_t) char mem[ARENA_BYTES];
};

static void scan_init(struct fg_req_scan *rs, enum fg_api api, struct fg_req_info *info)
{
	fg_arena_init(&rs->arena, rs->mem, sizeof(rs->mem));
	scan_reset(&rs->sc, &rs->arena, api, info);
	fg_jt_init(&rs->jt);
	rs->failed = false;
}

/* body: all of it so far (len bytes), of which what is past the last call is new. */
static void scan_feed(struct fg_req_scan *rs, const char *body, size_t len)
{
	if (rs->failed)
		return;
	rs->sc.body = body;
	rs->sc.len = len;
	if (fg_jt_feed(&rs->jt, body, len, jt_token, &rs->sc) < 0)
		rs->failed = true;
}

static int scan_finish(struct fg_req_scan *rs, const char *body, size_t len, char *msg,
		       size_t msglen, const char **param)
{
	struct scan *sc = &rs->sc;
	int rc;

	*param = NULL;
	sc->body = body;
	sc->len = len;
	/* a value that is not an object is refused either way: the reference words it */
	if (rs->failed || fg_jt_finish(&rs->jt, body, len, jt_token, sc) != FG_JT_DONE ||
	    sc->not_object) {
		scan_free(sc);
		return fg_request_parse_reference(sc->api, body, len, sc->info, msg, msglen, param);
	}
	rc = interpret(sc, sc->api, msg, msglen, param);
	scan_free(sc);
	if (rc)
		memset(sc->info, 0, sizeof(*sc->info));
	return rc;
}

int fg_request_parse(enum fg_api api, const char *body, size_t len, struct fg_req_info *info,
		     char *msg, size_t msglen, const char **param)
{
	struct fg_req_scan rs;

	scan_init(&rs, api, info);
	return scan_finish(&rs, body, len, msg, msglen, param);
}

struct fg_req_scan *fg_request_scan_new(enum fg_api api)
{
	struct fg_req_scan *rs = malloc(sizeof(*rs));

	if (rs)
		scan_init(rs, api, &rs->info);
	return rs;
}

enum fg_api fg_request_scan_api(const struct fg_req_scan *rs)
{
	return rs->sc.api;
}

void fg_request_scan_feed(struct fg_req_scan *rs, const char *body, size_t len)
{
	scan_feed(rs, body, len);
}

int fg_request_scan_finish(struct fg_req_scan *rs, const char *body, size_t len,
			   struct fg_req_info *info, char *msg, size_t msglen, const char **param)
{
	int rc = scan_finish(rs, body, len, msg, msglen, param);

	*info = rs->info;
	free(rs);
	return rc;
}

void fg_request_scan_free(struct fg_req_scan *rs)
{
	if (!rs)
		return;
	scan_free(&rs->sc);
	free(rs);
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

/* A cut takes its member and the comma after it; past the last member
 * that stays (kept_end), the comma before it goes instead. */
static struct cut cut_of(size_t cut_from, size_t cut_to, size_t kept_end)
{
	return (struct cut){ kept_end && cut_from > kept_end ? kept_end : cut_from, cut_to };
}

#define N_OWNED 6

/* `"key":` then v and a comma, at out + o (printf cost more than the rest
 * of the splice); returns the new end. */
static size_t put_member(char *out, size_t o, const char *key, uint64_t v)
{
	char digits[20];
	int n = 0;
	size_t kl = strlen(key);

	memcpy(out + o, key, kl);
	o += kl;
	do
		digits[n++] = (char)('0' + v % 10);
	while ((v /= 10));
	while (n)
		out[o++] = digits[--n];
	out[o++] = ',';
	return o;
}

/* The parts of body[from, to) left by the cuts (sorted, possibly
 * overlapping), as ranges; returns their count (at most n + 1). */
static uint32_t parts_less(struct fg_body_part *out, size_t from, size_t to, const struct cut *c,
			   int n)
{
	uint32_t k = 0;
	size_t at = from;

	for (int i = 0; i < n; i++) {
		if (c[i].to <= at)
			continue;
		if (c[i].from > at)
			out[k++] = (struct fg_body_part){ at, c[i].from };
		at = c[i].to;
	}
	if (to > at)
		out[k++] = (struct fg_body_part){ at, to };
	return k;
}

static const char usage_opts[] =
	"\"stream_options\":{\"include_usage\":true,\"continuous_usage_stats\":true";

size_t fg_request_forward_head_room(const struct fg_req_info *info, size_t salt_len)
{
	const struct fg_req_member *so = &info->stream_options;
	size_t so_inner = so->present && so->is_object ? so->close - so->open - 1 : 0;

	return 1 + (14 + salt_len + 2) + 24 + (sizeof(usage_opts) + 1 + so_inner + 2) + 3 * 48 + 1;
}

int fg_request_forward(const struct fg_req_info *info, const char *body, size_t len,
		       const struct fg_rewrite *rw, struct fg_fwd_body *fwd)
{
	const struct fg_req_member *so = &info->stream_options;
	bool carry_so = rw->force_usage && so->present;
	bool chat = info->api == FG_API_CHAT, responses = info->api == FG_API_RESPONSES;
	bool cap = rw->max_tokens > 0;
	const struct { const struct fg_req_member *m; bool cut; } owned[N_OWNED] = {
		{ &info->cache_salt, true },
		{ &info->priority, true },
		{ so, carry_so },
		{ &info->max_tokens, cap && !responses },
		{ &info->max_completion_tokens, cap && chat },
		{ &info->max_output_tokens, cap && responses },
	};
	/* where the last client member that stays ends (0: none stays) */
	size_t kept_end = info->other_end;
	for (int i = 0; i < N_OWNED; i++)
		if (owned[i].m->present && !owned[i].cut && owned[i].m->value_end > kept_end)
			kept_end = owned[i].m->value_end;
	struct cut cuts[N_OWNED];
	int n = 0;
	for (int i = 0; i < N_OWNED; i++)
		if (owned[i].m->present && owned[i].cut)
			cuts[n++] = cut_of(owned[i].m->cut_from, owned[i].m->cut_to, kept_end);
	qsort(cuts, (size_t)n, sizeof(cuts[0]), cut_cmp);
	bool others = kept_end != 0;

	/* the client's other stream_options members, carried into ours */
	size_t so_inner = carry_so && so->is_object ? so->close - so->open - 1 : 0;
	size_t salt_len = rw->cache_salt ? strlen(rw->cache_salt) : 0;
	char *out = malloc(fg_request_forward_head_room(info, salt_len));
	memset(fwd, 0, sizeof(*fwd));
	if (!out)
		return -1;
	size_t o = 0;
	out[o++] = '{';
	if (rw->cache_salt) {
		/* salts are [A-Za-z0-9._-] (agent/proxy/salt.c): no JSON escaping needed */
		memcpy(out + o, "\"cache_salt\":\"", 14), o += 14;
		memcpy(out + o, rw->cache_salt, salt_len), o += salt_len;
		out[o++] = '"', out[o++] = ',';
	}
	if (rw->set_priority)
		o += (size_t)snprintf(out + o, 24, "\"priority\":%d,", rw->priority);
	if (cap) {
		if (responses)
			o = put_member(out, o, "\"max_output_tokens\":", rw->max_tokens);
		else
			o = put_member(out, o, "\"max_tokens\":", rw->max_tokens);
		if (chat)
			o = put_member(out, o, "\"max_completion_tokens\":", rw->max_tokens);
	}
	if (rw->force_usage) {
		memcpy(out + o, usage_opts, sizeof(usage_opts) - 1), o += sizeof(usage_opts) - 1;
		if (so_inner) {
			struct cut c[2];
			int k = 0;
			if (info->include_usage.present)
				c[k++] = cut_of(info->include_usage.cut_from, info->include_usage.cut_to,
						info->so_kept_end);
			if (info->continuous_usage.present)
				c[k++] = cut_of(info->continuous_usage.cut_from,
						info->continuous_usage.cut_to, info->so_kept_end);
			qsort(c, (size_t)k, sizeof(c[0]), cut_cmp);
			out[o++] = ',';
			size_t w = copy_less(out + o, body, so->open + 1, so->close, c, k);
			if (all_space(out + o, w))
				o--; /* nothing else was in it: no comma */
			else
				o += w;
		}
		out[o++] = '}', out[o++] = ',';
	}
	if (!others && o > 1)
		o--; /* the client's object keeps no member: no comma after ours */
	out[o] = 0;
	fwd->head = out;
	fwd->head_len = o;
	fwd->n = parts_less(fwd->part, info->brace + 1, len, cuts, n);
	fwd->len = o;
	for (uint32_t k = 0; k < fwd->n; k++)
		fwd->len += fwd->part[k].to - fwd->part[k].from;
	return 0;
}

void fg_fwd_body_free(struct fg_fwd_body *fwd)
{
	free(fwd->head);
	memset(fwd, 0, sizeof(*fwd));
}

char *fg_request_forward_body(const struct fg_req_info *info, const char *body, size_t len,
			      const struct fg_rewrite *rw, size_t *out_len)
{
	struct fg_fwd_body fwd;

	if (fg_request_forward(info, body, len, rw, &fwd))
		return NULL;
	char *out = malloc(fwd.len + 1);
	if (out) {
		size_t o = fwd.head_len;
		memcpy(out, fwd.head, o);
		for (uint32_t k = 0; k < fwd.n; k++) {
			memcpy(out + o, body + fwd.part[k].from, fwd.part[k].to - fwd.part[k].from);
			o += fwd.part[k].to - fwd.part[k].from;
		}
		out[o] = 0;
		*out_len = o;
	}
	fg_fwd_body_free(&fwd);
	return out;
}

/* ---- the /tokenize call ------------------------------------------------------------ */

/* The value of a "key": value span. */
static struct fg_span value_of(const char *body, struct fg_span m)
{
	size_t i = m.from + 1;

	while (i < m.to && !(body[i] == '"' && body[i - 1] != '\\'))
		i++;
	i++;
	while (i < m.to && (body[i] == ' ' || body[i] == '\t' || body[i] == '\r' || body[i] == '\n' ||
			    body[i] == ':'))
		i++;
	return (struct fg_span){ i, m.to };
}

struct tok_out {
	char *p;
	size_t o, cap;
	bool first;
};

static void put(struct tok_out *t, const char *s, size_t n)
{
	if (t->o + n <= t->cap)
		memcpy(t->p + t->o, s, n);
	t->o += n;
}

static void member(struct tok_out *t, const char *body, struct fg_span m)
{
	if (!m.to)
		return;
	if (!t->first)
		put(t, ",", 1);
	t->first = false;
	put(t, body + m.from, m.to - m.from);
}

char *fg_tokenize_body(const struct fg_req_info *info, const char *body, size_t len,
		       size_t *out_len)
{
	const struct fg_request_shape *s = &info->shape;
	const struct fg_span *tm = info->tok;
	struct tok_out t = { .first = true };

	if (s->prompts > 1 || s->prompt_token_ids || info->api == FG_API_DETOKENIZE ||
	    info->api == FG_API_PASSTHROUGH || info->api == FG_API_NONE)
		return NULL;
	t.cap = len + 256;
	if (!(t.p = malloc(t.cap)))
		return NULL;
	put(&t, "{", 1);
	member(&t, body, tm[FG_TM_MODEL]);
	if (info->api == FG_API_RESPONSES) {
		/* the responses server renders these as chat messages */
		struct fg_span in = value_of(body, tm[FG_TM_PROMPT]);
		if (!t.first)
			put(&t, ",", 1);
		t.first = false;
		put(&t, "\"messages\":[", 12);
		bool any = false;
		if (tm[FG_TM_INSTRUCTIONS].to) {
			struct fg_span ins = value_of(body, tm[FG_TM_INSTRUCTIONS]);
			if (body[ins.from] == '"') {
				put(&t, "{\"role\":\"system\",\"content\":", 27);
				put(&t, body + ins.from, ins.to - ins.from);
				put(&t, "}", 1);
				any = true;
			}
		}
		if (any)
			put(&t, ",", 1);
		if (info->input_is_string) {
			put(&t, "{\"role\":\"user\",\"content\":", 25);
			put(&t, body + in.from, in.to - in.from);
			put(&t, "}", 1);
		} else {
			/* the array's items, without its brackets */
			size_t a = in.from + 1, b = in.to;
			while (b > a && body[b - 1] != ']')
				b--;
			put(&t, body + a, b > a ? b - 1 - a : 0);
		}
		put(&t, "]", 1);
		member(&t, body, tm[FG_TM_TOOLS]);
	} else if (s->chat) {
		static const enum fg_tok_member chat[] = {
			FG_TM_MESSAGES, FG_TM_TOOLS, FG_TM_ADD_GENERATION, FG_TM_CONTINUE_FINAL,
			FG_TM_CHAT_TEMPLATE, FG_TM_TEMPLATE_KWARGS, FG_TM_ADD_SPECIAL, FG_TM_MM_KWARGS,
		};
		for (size_t k = 0; k < sizeof(chat) / sizeof(chat[0]); k++)
			member(&t, body, tm[chat[k]]);
	} else {
		/* completion-shaped: the prompt (an embeddings input renamed) */
		struct fg_span p = value_of(body, tm[FG_TM_PROMPT]);
		if (!tm[FG_TM_PROMPT].to) {
			free(t.p);
			return NULL;
		}
		if (!t.first)
			put(&t, ",", 1);
		t.first = false;
		put(&t, "\"prompt\":", 9);
		put(&t, body + p.from, p.to - p.from);
		member(&t, body, tm[FG_TM_ADD_SPECIAL]);
	}
	put(&t, "}", 1);
	if (t.o >= t.cap) {
		free(t.p);
		return NULL; /* cannot happen: the body holds every copied byte */
	}
	t.p[t.o] = 0;
	*out_len = t.o;
	return t.p;
}

/* vLLM answers {"count":N,"max_model_len":M,"tokens":[...],"token_strs":null}:
 * the two numbers come first, so the reader stops there. */
struct tok_answer {
	int depth;
	int key;                  /* 1 count, 2 max_model_len at depth 1 */
	bool has_count, has_max, bad, not_object;
	uint64_t count, max;
	char tmp[32];
};

static int ta_value(struct tok_answer *a, const char *num, size_t n)
{
	if (a->depth == 0) {
		a->not_object = true;
		return 0;
	}
	if (a->depth != 1 || !a->key)
		return 1;
	long long i;
	double d;
	if (!num || n >= sizeof(a->tmp) || fg_json_number(num, n, a->tmp, &d, &i) != FG_JSON_INT ||
	    i < 0) {
		a->bad = true;
		return 0;
	}
	if (a->key == 1)
		a->count = (uint64_t)i, a->has_count = true;
	else
		a->max = (uint64_t)i, a->has_max = true;
	return !(a->has_count && a->has_max); /* both read: stop */
}

static int ta_null(void *ctx) { return ta_value(ctx, NULL, 0); }
static int ta_bool(void *ctx, int b) { (void)b; return ta_value(ctx, NULL, 0); }
static int ta_number(void *ctx, const char *s, size_t l) { return ta_value(ctx, s, l); }
static int ta_string(void *ctx, const unsigned char *s, size_t l)
{
	(void)s, (void)l;
	return ta_value(ctx, NULL, 0);
}

static int ta_key(void *ctx, const unsigned char *s, size_t l)
{
	struct tok_answer *a = ctx;

	if (a->depth == 1)
		a->key = key_is(s, l, "count") ? 1 : key_is(s, l, "max_model_len") ? 2 : 0;
	return 1;
}

static int ta_open(void *ctx)
{
	struct tok_answer *a = ctx;

	if (a->depth == 1 && a->key) {
		a->bad = true;
		return 0;
	}
	a->depth++;
	return 1;
}

static int ta_close(void *ctx)
{
	((struct tok_answer *)ctx)->depth--;
	return 1;
}

static const yajl_callbacks answer_callbacks = {
	.yajl_null = ta_null,
	.yajl_boolean = ta_bool,
	.yajl_number = ta_number,
	.yajl_string = ta_string,
	.yajl_start_map = ta_open,
	.yajl_map_key = ta_key,
	.yajl_end_map = ta_close,
	.yajl_start_array = ta_open,
	.yajl_end_array = ta_close,
};

int fg_tokenize_answer(const char *body, size_t len, uint64_t *count, uint64_t *max_model_len)
{
	alignas(max_align_t) char mem[4096];
	struct fg_arena arena;
	struct tok_answer a = { 0 };

	*count = *max_model_len = 0;
	fg_arena_init(&arena, mem, sizeof(mem));
	yajl_handle h = yajl_alloc(&answer_callbacks, &arena.funcs, &a);
	if (!h)
		return -1;
	yajl_status ys = yajl_parse(h, (const unsigned char *)body, len);
	if (ys == yajl_status_ok)
		ys = yajl_complete_parse(h);
	yajl_free(h);
	bool stopped_early = ys == yajl_status_client_canceled && a.has_count && a.has_max;
	if ((ys != yajl_status_ok && !stopped_early) || a.bad || a.not_object || !a.has_count)
		return -1;
	*count = a.count;
	*max_model_len = a.has_max ? a.max : 0;
	return 0;
}
