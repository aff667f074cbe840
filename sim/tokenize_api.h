/* tokenize_api.h — vLLM's POST /tokenize and POST /detokenize.
 *
 * /tokenize takes a completion body {"prompt": "text"} or a chat body
 * {"messages": [...], "add_generation_prompt", "continue_final_message"}
 * (plus model, add_special_tokens, return_token_strs) and answers
 * {"count","max_model_len","tokens","token_strs"}. The chat form renders
 * through chat_prompt.h, the same code /v1/chat/completions uses, so count
 * equals the usage.prompt_tokens a request with that body reports. Like
 * vLLM it does not check the prompt against max_model_len: a gateway asks
 * precisely when a prompt may be too long. add_special_tokens changes
 * nothing (the sim's text has no BOS).
 *
 * /detokenize takes {"tokens": [ids]} and answers {"prompt": "text"}.
 *
 * Pure: a body in, a JSON answer or an OpenAI-shaped error out.
 */
#ifndef FAIRGATE_SIM_TOKENIZE_API_H
#define FAIRGATE_SIM_TOKENIZE_API_H

#include <stdbool.h>
#include <stddef.h>

#include "sim/openai_error.h"
#include "sim/request_fields.h"

/* The answer as a malloc'd JSON string, or NULL and *err filled. */
char *sim_tokenize(const char *body, size_t len, const struct sim_request_limits *lim,
		   struct sim_error *err);
char *sim_detokenize_body(const char *body, size_t len, const struct sim_request_limits *lim,
			  struct sim_error *err);

#endif
