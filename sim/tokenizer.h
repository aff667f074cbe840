/* tokenizer.h — the simulator's deterministic tokeniser and its one vocabulary.
 *
 * There is no learned vocabulary: text becomes one token per 4 bytes (the
 * last one padded with NULs), so a prompt of B bytes is ceil(B/4) tokens and
 * a gateway can calibrate chars/token exactly from usage.prompt_tokens. A
 * text token's id is its 4 bytes read little-endian, so equal text gives
 * equal ids (what the prefix cache needs). Ids whose top byte is 0xFC..0xFF
 * never come from text (UTF-8 has no such byte) and are the special tokens:
 *
 *   0xFFFFFF01..03      <|start|> <|sep|> <|end|>  (chat framing)
 *   0xFF000000 | fnv24  a role's name token
 *   0xFE/0xFD/0xFC ...  image / audio / video placeholders: the low 24 bits
 *                       hash the item's source (URL or data), so the same
 *                       image shares prefix-cache blocks and another does not
 *
 * A chat message is <|start|> role <|sep|> content <|end|>; the generation
 * prompt is <|start|> assistant <|sep|>. A message's content is its media
 * placeholders (--image-tokens etc. per part, in order) followed by its text
 * parts joined with "\n", so
 *
 *   prompt_tokens = [3 if add_generation_prompt]
 *                 + sum over messages of (4 + media tokens + ceil(text_bytes / 4))
 *                 - [1 if continue_final_message: the last message stays open]
 *
 * Generated tokens are filler words of exactly 4 bytes (" lor", " ips", ...)
 * whose ids are those bytes, like any text: a completion of N tokens is 4N
 * bytes, and /detokenize turns prompt and output ids back into their text.
 */
#ifndef FAIRGATE_SIM_TOKENIZER_H
#define FAIRGATE_SIM_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SIM_BYTES_PER_TOKEN 4
#define SIM_CHAT_MESSAGE_OVERHEAD 4
#define SIM_CHAT_REPLY_OVERHEAD 3
#define SIM_TOKEN_STR_MAX 64   /* longest token string sim_token_str writes, NUL included */

enum sim_modality { SIM_MM_IMAGE = 0, SIM_MM_AUDIO = 1, SIM_MM_VIDEO = 2, SIM_MM_N = 3 };

struct sim_tokens {
	uint32_t *ids;
	uint32_t n, cap;
};

static inline uint64_t sim_text_token_count(size_t bytes)
{
	return (bytes + SIM_BYTES_PER_TOKEN - 1) / SIM_BYTES_PER_TOKEN;
}

/* "image", "audio", "video" (as vLLM names modalities). */
const char *sim_modality_name(enum sim_modality m);

/* All return 0, or -1 when out of memory or past `limit` tokens (the
 * sequence is then left unchanged past the limit; callers report it). */
int sim_tokens_push(struct sim_tokens *t, uint32_t id, uint32_t limit);
int sim_tokens_text(struct sim_tokens *t, const char *s, size_t len, uint32_t limit);
int sim_tokens_chat_message_begin(struct sim_tokens *t, const char *role, uint32_t limit);
int sim_tokens_chat_message_end(struct sim_tokens *t, uint32_t limit);
int sim_tokens_chat_generation_prompt(struct sim_tokens *t, uint32_t limit);
/* `count` placeholder tokens for one media item whose source is src[0..len). */
int sim_tokens_media(struct sim_tokens *t, enum sim_modality m, const char *src, size_t len,
		     uint32_t count, uint32_t limit);
/* Keep only the last `keep` tokens (vLLM's truncate_prompt_tokens). */
void sim_tokens_keep_last(struct sim_tokens *t, uint32_t keep);
void sim_tokens_free(struct sim_tokens *t);

/* The id of a generated token drawn from the 64 filler words by `h`. */
uint32_t sim_output_token(uint64_t h);

/* A text token's 4 bytes (the id little-endian). */
static inline void sim_token_bytes(uint32_t id, char out[SIM_BYTES_PER_TOKEN])
{
	out[0] = (char)(id & 0xFF);
	out[1] = (char)(id >> 8 & 0xFF);
	out[2] = (char)(id >> 16 & 0xFF);
	out[3] = (char)(id >> 24);
}

static inline bool sim_token_is_special(uint32_t id)
{
	return id >= 0xFC000000u;
}

/* The text of ids[0..n) as a malloc'd, NUL-terminated UTF-8 string (*len
 * bytes; it may hold NULs the client sent as "\u0000"): text tokens give
 * their bytes without the trailing NUL padding, special tokens their names
 * ("<|start|>", "user", "<|image|>", ...), and bytes that are not UTF-8
 * become U+FFFD, as a byte-level tokenizer's decode does. NULL when out
 * of memory. */
char *sim_detokenize(const uint32_t *ids, size_t n, size_t *len);

/* One token's string for /tokenize's token_strs, NUL-terminated in buf:
 * its text when that is UTF-8, else each byte as <0xNN> (sentencepiece's
 * byte fallback spelling); special tokens by name. */
void sim_token_str(uint32_t id, char buf[SIM_TOKEN_STR_MAX]);

#endif
