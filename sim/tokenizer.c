/* tokenizer.c — see tokenizer.h for the rule. */
#include "tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOK_START 0xFFFFFF01u
#define TOK_SEP   0xFFFFFF02u
#define TOK_END   0xFFFFFF03u
#define TOP_ROLE  0xFFu
#define LOW24     0x00FFFFFFu

static const char *const modality_names[SIM_MM_N] = { "image", "audio", "video" };
/* roles /detokenize can name; any other role's token reads as <|role|> */
static const char *const known_roles[] = { "system", "user", "assistant", "developer",
					   "tool", "function" };

const char *sim_modality_name(enum sim_modality m)
{
	return (unsigned)m < SIM_MM_N ? modality_names[m] : "media";
}

/* Placeholders of modality m carry top byte 0xFE - m. */
static uint32_t media_top(enum sim_modality m)
{
	return 0xFEu - (uint32_t)m;
}

int sim_tokens_push(struct sim_tokens *t, uint32_t id, uint32_t limit)
{
	if (t->n >= limit)
		return -1;
	if (t->n == t->cap) {
		uint32_t cap = t->cap ? t->cap * 2 : 64;
		uint32_t *ids = realloc(t->ids, (size_t)cap * sizeof(*ids));
		if (!ids)
			return -1;
		t->ids = ids;
		t->cap = cap;
	}
	t->ids[t->n++] = id;
	return 0;
}

int sim_tokens_text(struct sim_tokens *t, const char *s, size_t len, uint32_t limit)
{
	for (size_t i = 0; i < len; i += SIM_BYTES_PER_TOKEN) {
		uint8_t b[4] = { 0 };
		memcpy(b, s + i, len - i < 4 ? len - i : 4);
		uint32_t id = b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
		if (sim_tokens_push(t, id, limit))
			return -1;
	}
	return 0;
}

static uint32_t fnv1a32(const char *s)
{
	uint32_t h = 2166136261u;

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	return h;
}

static uint32_t role_token(const char *role)
{
	return TOP_ROLE << 24 | (fnv1a32(role) & LOW24);
}

int sim_tokens_chat_message_begin(struct sim_tokens *t, const char *role, uint32_t limit)
{
	if (sim_tokens_push(t, TOK_START, limit) || sim_tokens_push(t, role_token(role), limit))
		return -1;
	return sim_tokens_push(t, TOK_SEP, limit);
}

int sim_tokens_chat_message_end(struct sim_tokens *t, uint32_t limit)
{
	return sim_tokens_push(t, TOK_END, limit);
}

int sim_tokens_chat_generation_prompt(struct sim_tokens *t, uint32_t limit)
{
	return sim_tokens_chat_message_begin(t, "assistant", limit);
}

static uint64_t splitmix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

int sim_tokens_media(struct sim_tokens *t, enum sim_modality m, const char *src, size_t len,
		     uint32_t count, uint32_t limit)
{
	uint64_t h = 1469598103934665603ull ^ (uint64_t)m;

	for (size_t i = 0; i < len; i++)
		h = (h ^ (uint8_t)src[i]) * 1099511628211ull;
	for (uint32_t i = 0; i < count; i++)
		if (sim_tokens_push(t, media_top(m) << 24 | ((uint32_t)splitmix64(h + i) & LOW24),
				    limit))
			return -1;
	return 0;
}

void sim_tokens_keep_last(struct sim_tokens *t, uint32_t keep)
{
	if (keep >= t->n)
		return;
	memmove(t->ids, t->ids + (t->n - keep), (size_t)keep * sizeof(*t->ids));
	t->n = keep;
}

void sim_tokens_free(struct sim_tokens *t)
{
	free(t->ids);
	memset(t, 0, sizeof(*t));
}

static const char words[64][5] = {
	" lor", " ips", " dol", " sit", " ame", " con", " sec", " adi", " pis", " eli",
	" sed", " do ", " eiu", " tem", " por", " inc", " ut ", " lab", " et ", " mag",
	" ali", " qua", " ven", " nis", " exe", " ull", " lam", " co ", " ea ", " com",
	" dui", " aut", " iru", " rep", " vol", " vel", " ess", " cil", " fug", " nul",
	" par", " exc", " occ", " cup", " non", " pro", " sun", " in ", " cul", " qui",
	" off", " des", " mol", " ani", " id ", " est", " per", " und", " omn", " ist",
	" nat", " err", " vol", " acc",
};

uint32_t sim_output_token(uint64_t h)
{
	const unsigned char *w = (const unsigned char *)words[h % 64];

	return w[0] | (uint32_t)w[1] << 8 | (uint32_t)w[2] << 16 | (uint32_t)w[3] << 24;
}

/* ---- decoding ----------------------------------------------------------------- */

/* The name of a special token, or NULL for a text token. */
static const char *special_name(uint32_t id, char buf[SIM_TOKEN_STR_MAX])
{
	uint32_t top = id >> 24;

	if (!sim_token_is_special(id))
		return NULL;
	if (id == TOK_START)
		return "<|start|>";
	if (id == TOK_SEP)
		return "<|sep|>";
	if (id == TOK_END)
		return "<|end|>";
	if (top == TOP_ROLE) {
		for (size_t i = 0; i < sizeof(known_roles) / sizeof(*known_roles); i++)
			if (role_token(known_roles[i]) == id)
				return known_roles[i];
		snprintf(buf, SIM_TOKEN_STR_MAX, "<|role_%06x|>", id & LOW24);
		return buf;
	}
	for (int m = 0; m < SIM_MM_N; m++)
		if (top == media_top((enum sim_modality)m)) {
			snprintf(buf, SIM_TOKEN_STR_MAX, "<|%s|>", modality_names[m]);
			return buf;
		}
	snprintf(buf, SIM_TOKEN_STR_MAX, "<|reserved_%08x|>", id);
	return buf;
}

/* Length of the well-formed UTF-8 sequence at p[0..n), or 0 (RFC 3629:
 * no overlongs, no surrogates, nothing past U+10FFFF). */
static size_t utf8_len(const unsigned char *p, size_t n)
{
	unsigned c = p[0];
	size_t len;
	unsigned lo = 0x80, hi = 0xBF;

	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF)
		len = 2;
	else if (c >= 0xE0 && c <= 0xEF) {
		len = 3;
		if (c == 0xE0)
			lo = 0xA0;
		if (c == 0xED)
			hi = 0x9F;
	} else if (c >= 0xF0 && c <= 0xF4) {
		len = 4;
		if (c == 0xF0)
			lo = 0x90;
		if (c == 0xF4)
			hi = 0x8F;
	} else {
		return 0;
	}
	if (n < len || p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (p[i] < 0x80 || p[i] > 0xBF)
			return 0;
	return len;
}

/* A text token's bytes without the trailing NUL padding. */
static size_t token_text(uint32_t id, char out[SIM_BYTES_PER_TOKEN])
{
	size_t n = SIM_BYTES_PER_TOKEN;

	sim_token_bytes(id, out);
	while (n > 1 && out[n - 1] == '\0')
		n--;
	return n;
}

char *sim_detokenize(const uint32_t *ids, size_t n, size_t *len)
{
	/* raw bytes first, then UTF-8 repair: a character may span tokens */
	char *raw = malloc(n * SIM_TOKEN_STR_MAX + 1);
	size_t rl = 0;

	if (!raw)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		char buf[SIM_TOKEN_STR_MAX];
		const char *name = special_name(ids[i], buf);
		if (name) {
			size_t l = strlen(name);
			memcpy(raw + rl, name, l);
			rl += l;
		} else {
			rl += token_text(ids[i], raw + rl);
		}
	}
	/* U+FFFD is 3 bytes for each bad byte */
	char *out = malloc(rl * 3 + 1);
	size_t ol = 0;
	if (!out) {
		free(raw);
		return NULL;
	}
	for (size_t i = 0; i < rl;) {
		size_t l = utf8_len((const unsigned char *)raw + i, rl - i);
		if (l) {
			memcpy(out + ol, raw + i, l);
			ol += l;
			i += l;
		} else {
			memcpy(out + ol, "\xEF\xBF\xBD", 3);
			ol += 3;
			i++;
		}
	}
	out[ol] = '\0';
	free(raw);
	*len = ol;
	return out;
}

void sim_token_str(uint32_t id, char buf[SIM_TOKEN_STR_MAX])
{
	char tmp[SIM_TOKEN_STR_MAX], text[SIM_BYTES_PER_TOKEN];
	const char *name = special_name(id, tmp);
	size_t n, i = 0, o = 0;

	if (name) {
		snprintf(buf, SIM_TOKEN_STR_MAX, "%s", name);
		return;
	}
	n = token_text(id, text);
	while (i < n) {
		size_t l = text[i] ? utf8_len((const unsigned char *)text + i, n - i) : 0;
		if (l) {
			memcpy(buf + o, text + i, l);
			o += l;
			i += l;
		} else {
			o += (size_t)snprintf(buf + o, SIM_TOKEN_STR_MAX - o, "<0x%02X>",
					      (unsigned char)text[i]);
			i++;
		}
	}
	buf[o] = '\0';
}
