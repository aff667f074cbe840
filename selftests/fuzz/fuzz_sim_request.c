/* fuzz_sim_request.c — libFuzzer target: fairgate-sim's request parsers
 * (sim/openai_request.c for chat, completions and responses bodies,
 * sim/tokenize_api.c for /tokenize and /detokenize) on arbitrary bodies.
 *
 * The first byte picks the endpoint and the engine's limits: bit 0 | bit 5
 * << 1 = chat, completions, responses, or the tokenizer (bit 4 then picks
 * /detokenize); bit 1 a served model name, bit 2 a 64-token context, bit 3
 * priority scheduling, bit 4 a default max_tokens of 1, bit 6 a multimodal
 * model (image parts 5 tokens, no audio or video), bit 7 best_of refused
 * and usage forced.
 *
 * Invariants: a refusal is an HTTP error status with a type and a message
 * and serialises to OpenAI's error JSON with that status as its code; an
 * accepted request fits the context (every tokenised prompt plus max_tokens
 * within max_model_len), has 1..SIM_MAX_CHOICES choices in all (one on
 * responses), counts media only for a modality the model has, a salt only
 * if it is one vLLM accepts, a non-zero priority only under priority
 * scheduling, continuous usage only with include_usage, min_tokens within
 * max_tokens; /tokenize answers count == len(tokens) and, for a body that
 * is also an accepted chat request (without truncate_prompt_tokens), the
 * count that request's prompt has; /detokenize answers a JSON string. */
#include <jansson.h>
#include <string.h>

#include "sim/openai_request.h"
#include "sim/tokenize_api.h"
#include "selftests/fuzz/fuzz_common.h"

static void check_error(const struct sim_error *err)
{
	FUZZ_CHECK(err->status >= 400 && err->status <= 599, "status %d", err->status);
	FUZZ_CHECK(err->type && err->type[0], "no type");
	FUZZ_CHECK(memchr(err->message, 0, sizeof(err->message)) && err->message[0], "no message");
	FUZZ_CHECK(memchr(err->param, 0, sizeof(err->param)), "param not terminated");

	char *js = sim_error_json(err);
	FUZZ_CHECK(js, "error JSON not built");
	json_t *o = json_loads(js, JSON_REJECT_DUPLICATES, NULL);
	json_t *e = json_object_get(o, "error");
	FUZZ_CHECK(json_is_string(json_object_get(e, "message")), "error JSON: %s", js);
	FUZZ_CHECK(json_integer_value(json_object_get(e, "code")) == err->status,
		   "error JSON code: %s", js);
	json_decref(o);
	free(js);
}

static void check_request(const struct sim_request *r, const struct sim_request_limits *lim)
{
	FUZZ_CHECK(r->n_prompts >= 1 && r->n >= 1, "%u prompts, n %u", r->n_prompts, r->n);
	FUZZ_CHECK((uint64_t)r->n_prompts * r->n <= SIM_MAX_CHOICES, "%u x %u choices",
		   r->n_prompts, r->n);
	FUZZ_CHECK(r->api != SIM_API_RESPONSES || (r->n_prompts == 1 && r->n == 1),
		   "responses with %u x %u choices", r->n_prompts, r->n);
	FUZZ_CHECK(r->max_tokens >= 1, "max_tokens 0");
	FUZZ_CHECK(r->min_tokens <= r->max_tokens, "min_tokens %u > max_tokens %u", r->min_tokens,
		   r->max_tokens);
	FUZZ_CHECK(r->prompts, "no prompts");
	for (uint32_t k = 0; k < r->n_prompts; k++) {
		uint64_t n = r->prompts[k].n;
		FUZZ_CHECK(n >= 1, "prompt %u is empty", k);
		FUZZ_CHECK(n + r->max_tokens <= lim->max_model_len,
			   "prompt %u: %llu tokens + max_tokens %u > max_model_len %u", k,
			   (unsigned long long)n, r->max_tokens, lim->max_model_len);
	}
	uint64_t media = 0;
	for (int m = 0; m < SIM_MM_N; m++) {
		FUZZ_CHECK(!r->media_tokens[m] || lim->media_tokens[m],
			   "%u tokens of a modality the model lacks", r->media_tokens[m]);
		media += r->media_tokens[m];
	}
	FUZZ_CHECK(media <= r->prompts[0].n, "%llu media tokens in a prompt of %u",
		   (unsigned long long)media, r->prompts[0].n);
	if (r->has_salt) {
		size_t len = strnlen(r->cache_salt, sizeof(r->cache_salt));
		FUZZ_CHECK(len < sizeof(r->cache_salt), "salt not terminated");
		FUZZ_CHECK(sim_cache_salt_valid(r->cache_salt, len), "invalid salt accepted");
	}
	FUZZ_CHECK(!r->priority || lim->priority_scheduling, "priority without priority scheduling");
	FUZZ_CHECK(!r->include_usage || r->stream, "include_usage without a stream");
	FUZZ_CHECK(!r->continuous_usage || r->include_usage, "continuous usage without include_usage");
}

/* /tokenize's answer; for a body that is also a chat request, its count. */
static void check_tokenize(const char *body, size_t size, const struct sim_request_limits *lim)
{
	struct sim_error err;
	char *out = sim_tokenize(body, size, lim, &err);

	if (!out) {
		check_error(&err);
		return;
	}
	json_t *o = json_loads(out, JSON_REJECT_DUPLICATES, NULL);
	json_t *tokens = json_object_get(o, "tokens"), *strs = json_object_get(o, "token_strs");
	FUZZ_CHECK(json_is_array(tokens), "no tokens: %.200s", out);
	FUZZ_CHECK(json_integer_value(json_object_get(o, "count")) ==
			   (json_int_t)json_array_size(tokens), "count: %.200s", out);
	FUZZ_CHECK(json_integer_value(json_object_get(o, "max_model_len")) == lim->max_model_len,
		   "max_model_len: %.200s", out);
	FUZZ_CHECK(json_is_null(strs) || json_array_size(strs) == json_array_size(tokens),
		   "token_strs: %.200s", out);

	json_t *root = json_loadb(body, size, JSON_ALLOW_NUL, NULL);
	struct sim_request r;
	if (json_object_get(root, "messages") && !json_object_get(root, "truncate_prompt_tokens") &&
	    sim_request_parse(SIM_API_CHAT, body, size, lim, &r, &err) == 0) {
		FUZZ_CHECK(r.prompts[0].n == json_array_size(tokens),
			   "/tokenize counts %zu, the chat request %u", json_array_size(tokens),
			   r.prompts[0].n);
		for (uint32_t i = 0; i < r.prompts[0].n; i++)
			FUZZ_CHECK(r.prompts[0].ids[i] ==
					   (uint32_t)json_integer_value(json_array_get(tokens, i)),
				   "token %u differs", i);
		sim_request_free(&r);
	}
	json_decref(root);
	json_decref(o);
	free(out);
}

static void check_detokenize(const char *body, size_t size, const struct sim_request_limits *lim)
{
	struct sim_error err;
	char *out = sim_detokenize_body(body, size, lim, &err);

	if (!out) {
		check_error(&err);
		return;
	}
	json_t *o = json_loads(out, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, NULL);
	FUZZ_CHECK(json_is_string(json_object_get(o, "prompt")), "answer: %.200s", out);
	json_decref(o);
	free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t opt = fuzz_take_byte(&data, &size);
	struct sim_request_limits lim = {
		.model = opt & 2 ? "llama-3.3-70b" : NULL,
		.max_model_len = opt & 4 ? 64 : 131072,
		.priority_scheduling = opt & 8,
		.default_max_tokens = opt & 16 ? 1 : 256,
		.media_tokens = { [SIM_MM_IMAGE] = opt & 64 ? 5 : 0 },
		.refuse_best_of = opt & 128,
		.force_include_usage = opt & 128,
	};
	unsigned which = (opt & 1) | (opt >> 4 & 2);
	struct sim_request r;
	struct sim_error err;
	/* a private copy so ASan sees any read past the body */
	char *body = malloc(size ? size : 1);

	memcpy(body, data, size);
	memset(&err, 0, sizeof(err));
	if (which == 3) {
		if (opt & 16)
			check_detokenize(body, size, &lim);
		else
			check_tokenize(body, size, &lim);
	} else if (sim_request_parse((enum sim_api)which, body, size, &lim, &r, &err)) {
		check_error(&err);
		FUZZ_CHECK(!r.prompts && !r.n_prompts && !r.instructions,
			   "refused request keeps its prompts");
	} else {
		check_request(&r, &lim);
		sim_request_free(&r);
	}
	free(body);
	return 0;
}
