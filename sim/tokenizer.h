/* tokenizer.h — the simulator's deterministic tokeniser.
 *
 * There is no vocabulary: text becomes one token per 4 bytes (the last one
 * padded), so a prompt of B bytes is ceil(B/4) tokens and a gateway can
 * calibrate chars/token exactly from usage.prompt_tokens. A token id is its
 * 4 bytes read little-endian, so equal text gives equal ids (what the prefix
 * cache needs). Chat messages are framed by special tokens that never equal
 * a text token (they contain byte 0xFF, which UTF-8 text never does):
 *
 *   prompt_tokens = 3 + sum over messages of (4 + ceil(content_bytes / 4))
 *
 * (4 = <|start|> role <|sep|> ... <|end|> per message, 3 = the assistant
 * generation prompt). Array-of-parts content joins its text parts with "\n".
 *
 * Generated tokens render as 4-byte words (" lor", " ips", ...), so a
 * completion of N tokens is exactly 4N bytes of text.
 */
#ifndef FAIRGATE_SIM_TOKENIZER_H
#define FAIRGATE_SIM_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#define SIM_BYTES_PER_TOKEN 4
#define SIM_CHAT_MESSAGE_OVERHEAD 4
#define SIM_CHAT_REPLY_OVERHEAD 3

struct sim_tokens {
	uint32_t *ids;
	uint32_t n, cap;
};

static inline uint64_t sim_text_token_count(size_t bytes)
{
	return (bytes + SIM_BYTES_PER_TOKEN - 1) / SIM_BYTES_PER_TOKEN;
}

/* All return 0, or -1 when out of memory or past `limit` tokens (the
 * sequence is then left unchanged past the limit; callers report it). */
int sim_tokens_push(struct sim_tokens *t, uint32_t id, uint32_t limit);
int sim_tokens_text(struct sim_tokens *t, const char *s, size_t len, uint32_t limit);
int sim_tokens_chat_message_begin(struct sim_tokens *t, const char *role, uint32_t limit);
int sim_tokens_chat_message_end(struct sim_tokens *t, uint32_t limit);
int sim_tokens_chat_generation_prompt(struct sim_tokens *t, uint32_t limit);
void sim_tokens_free(struct sim_tokens *t);

/* The 4-byte text of a generated token id (not NUL-terminated). */
const char *sim_token_text(uint32_t id);

#endif
