/* chat_prompt.h — a conversation rendered into the simulator's tokens.
 *
 * The chat framing of tokenizer.h applied to a list of messages whose
 * content is a string, null, or an array of parts: text parts ("text",
 * "input_text", "output_text", "refusal") and media parts ("image_url",
 * "input_image", "audio_url", "input_audio", "video_url", as vLLM names
 * them), each media part costing the served model's fixed number of
 * placeholder tokens (a text-only model refuses them as vLLM does). The
 * chat template's two switches are honoured: add_generation_prompt and
 * continue_final_message. /v1/chat/completions, /v1/responses and
 * /tokenize all render through here, so a body's prompt counts the same
 * on all three.
 *
 * Pure: JSON in, tokens or an OpenAI-shaped error out.
 */
#ifndef FAIRGATE_SIM_CHAT_PROMPT_H
#define FAIRGATE_SIM_CHAT_PROMPT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sim/request_fields.h"
#include "sim/tokenizer.h"

struct sim_chat_msg {
	const char *role;
	json_t *content;   /* string, array of parts, or NULL / null */
};

struct sim_chat_opts {
	bool add_generation_prompt;
	bool continue_final_message;
};

struct sim_prompt {
	struct sim_tokens tokens;
	uint32_t media_tokens[SIM_MM_N]; /* placeholder tokens by modality */
};

/* Read the template switches from a chat-shaped body (defaults: add the
 * generation prompt, do not continue); both true is a 400 as in vLLM. */
int sim_chat_opts_parse(json_t *root, struct sim_chat_opts *o, struct sim_error *err);

/* Render msgs[0..n) into out (free with sim_prompt_free, also on error).
 * `param` names the field errors point at ("messages", "input"). */
int sim_chat_render(const struct sim_chat_msg *msgs, size_t n, const struct sim_chat_opts *o,
		    const struct sim_request_limits *lim, const char *param,
		    struct sim_prompt *out, struct sim_error *err);

/* A chat body's "messages" array checked and rendered. */
int sim_chat_render_messages(json_t *root, const struct sim_chat_opts *o,
			     const struct sim_request_limits *lim, struct sim_prompt *out,
			     struct sim_error *err);

void sim_prompt_free(struct sim_prompt *p);

#endif
