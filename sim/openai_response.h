/* openai_response.h — OpenAI-shaped response bodies, as vLLM writes them:
 * the non-streaming chat.completion / text_completion object, and the SSE
 * "data: {...}\n\n" events of a stream (one per token, each with the running
 * usage when continuous usage stats are asked for, then an optional usage
 * chunk with empty choices, then "data: [DONE]"). All return malloc'd
 * strings (NULL when out of memory). */
#ifndef FAIRGATE_SIM_OPENAI_RESPONSE_H
#define FAIRGATE_SIM_OPENAI_RESPONSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "sim/openai_request.h"
#include "sim/tokenizer.h"

struct sim_usage {
	uint64_t prompt_tokens;
	uint64_t completion_tokens;
	uint64_t cached_tokens;
	uint32_t media_tokens[SIM_MM_N]; /* placeholders by modality, in prompt_tokens */
	bool details;              /* --enable-prompt-tokens-details */
};

struct sim_resp_meta {
	enum sim_api api;
	const char *id;
	time_t created;
	const char *model;
};

struct sim_resp_choice {
	const char *text;
	size_t len;
	const char *finish_reason; /* NULL = null */
};

char *sim_resp_full(const struct sim_resp_meta *m, const struct sim_resp_choice *choices,
		    uint32_t n, const struct sim_usage *u);

/* One stream event for choice `index`: role (chat only, NULL to omit) and
 * text delta, finish_reason on the last one. `running` (NULL to omit) is
 * stream_options.continuous_usage_stats' usage: this choice's prompt and
 * the tokens it has generated so far, no details (vLLM's shape). */
char *sim_resp_chunk(const struct sim_resp_meta *m, uint32_t index, const char *role,
		     const char *text, size_t len, const char *finish_reason,
		     const struct sim_usage *running);
char *sim_resp_usage_chunk(const struct sim_resp_meta *m, const struct sim_usage *u);

#define SIM_SSE_DONE "data: [DONE]\n\n"

#endif
