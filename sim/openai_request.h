/* openai_request.h — parse and validate a generation request as vLLM does.
 *
 * POST /v1/chat/completions (messages, see chat_prompt.h), POST
 * /v1/completions (prompt: string, array of strings, array of token ids or
 * array of arrays of token ids) and POST /v1/responses (input and
 * instructions, see responses_request.h). Fields read: model, the prompt,
 * max_tokens / max_completion_tokens (chat: the latter wins) /
 * max_output_tokens (responses), n (not in responses), best_of,
 * use_beam_search, min_tokens, ignore_eos, truncate_prompt_tokens, stream,
 * stream_options.include_usage and .continuous_usage_stats,
 * add_generation_prompt and continue_final_message (chat), cache_salt,
 * priority. Sampling fields that change no token count (temperature, top_p,
 * stop, seed, logprobs, tools, ...) are accepted and ignored, as are
 * unknown fields, which vLLM only logs.
 *
 * Pure: a body and limits in, a request (prompts already tokenised) or an
 * OpenAI-shaped error out.
 */
#ifndef FAIRGATE_SIM_OPENAI_REQUEST_H
#define FAIRGATE_SIM_OPENAI_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sim/openai_error.h"
#include "sim/request_fields.h"
#include "sim/tokenizer.h"

#define SIM_MAX_CHOICES 1024 /* prompts x n per request: keeps one body from
				exhausting memory; vLLM has no such cap */

enum sim_api { SIM_API_CHAT = 0, SIM_API_COMPLETIONS = 1, SIM_API_RESPONSES = 2 };

struct sim_request {
	enum sim_api api;
	uint32_t n_prompts;
	struct sim_tokens *prompts;
	uint32_t media_tokens[SIM_MM_N]; /* placeholders in the (one) chat or responses prompt */
	uint32_t max_tokens;       /* what the engine may generate, per sequence */
	uint32_t min_tokens;
	bool ignore_eos;
	uint32_t n;
	bool stream;
	bool include_usage;
	bool continuous_usage;     /* usage in every chunk (needs include_usage) */
	bool has_salt;
	char cache_salt[SIM_SALT_MAX + 1];
	int32_t priority;
	/* responses: echoed in the response object */
	char *instructions;        /* NULL = none */
	double temperature, top_p; /* as given, else vLLM's defaults (1.0) */
};

/* 0 and *out filled (free with sim_request_free), or -1 and *err filled. */
int sim_request_parse(enum sim_api api, const char *body, size_t len,
		      const struct sim_request_limits *lim, struct sim_request *out,
		      struct sim_error *err);
void sim_request_free(struct sim_request *r);

#endif
