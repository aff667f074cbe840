/* openai_request.h — parse and validate an OpenAI request body as vLLM does.
 *
 * POST /v1/chat/completions (messages: string or array-of-parts content) and
 * POST /v1/completions (prompt: string, array of strings, array of token ids
 * or array of arrays of token ids). Fields read: model, messages / prompt,
 * max_tokens, max_completion_tokens (wins over max_tokens for chat), n,
 * stream, stream_options.include_usage, cache_salt, priority. Other fields
 * are accepted and ignored, as vLLM does.
 *
 * Pure: a body and limits in, a request (prompts already tokenised) or an
 * OpenAI-shaped error out.
 */
#ifndef FAIRGATE_SIM_OPENAI_REQUEST_H
#define FAIRGATE_SIM_OPENAI_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sim/tokenizer.h"

#define SIM_SALT_MAX 128
#define SIM_MAX_CHOICES 1024 /* prompts x n per request: keeps one body from
				exhausting memory; vLLM has no such cap */

enum sim_api { SIM_API_CHAT = 0, SIM_API_COMPLETIONS = 1 };

struct sim_request_limits {
	const char *model;          /* served model name */
	uint32_t max_model_len;
	bool priority_scheduling;   /* --scheduling-policy priority */
	uint32_t default_max_tokens;/* when the request names none */
};

struct sim_request {
	enum sim_api api;
	uint32_t n_prompts;
	struct sim_tokens *prompts;
	uint32_t max_tokens;
	uint32_t n;
	bool stream;
	bool include_usage;
	bool has_salt;
	char cache_salt[SIM_SALT_MAX + 1];
	int32_t priority;
};

struct sim_error {
	int status;              /* HTTP status */
	const char *type;        /* "BadRequestError", "NotFoundError", ... */
	char param[32];          /* "" = null */
	char message[512];
};

/* 0 and *out filled (free with sim_request_free), or -1 and *err filled. */
int sim_request_parse(enum sim_api api, const char *body, size_t len,
		      const struct sim_request_limits *lim, struct sim_request *out,
		      struct sim_error *err);
void sim_request_free(struct sim_request *r);

/* Fill *err (printf-style message). Returns -1 for `return sim_error_set(...)`. */
int sim_error_set(struct sim_error *err, int status, const char *param, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* {"error":{"message","type","param","code"}} as a malloc'd string. */
char *sim_error_json(const struct sim_error *err);

/* The rule vLLM's validator applies to cache_salt, plus fairgate's: 1..128
 * bytes, none of '@', '/', '\\' or NUL. */
bool sim_cache_salt_valid(const char *s, size_t len);

#endif
