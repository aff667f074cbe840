/* tokenizer.c — see tokenizer.h for the rule. */
#include "tokenizer.h"

#include <stdlib.h>
#include <string.h>

#define TOK_START 0xFFFFFF01u
#define TOK_SEP   0xFFFFFF02u
#define TOK_END   0xFFFFFF03u

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

/* A role's token: 0xFF in the top byte, FNV-1a of the name below. */
static uint32_t role_token(const char *role)
{
	uint32_t h = 2166136261u;

	for (; *role; role++)
		h = (h ^ (uint8_t)*role) * 16777619u;
	return 0xFF000000u | (h & 0x00FFFFFFu);
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

const char *sim_token_text(uint32_t id)
{
	return words[id % 64];
}
