/* fuzz_sim_request.c — libFuzzer target: fairgate-sim's OpenAI request
 * parser (sim/openai_request.c) on arbitrary bodies.
 *
 * The first byte picks the API and the engine's limits (context length,
 * priority scheduling, a served model name or none). Invariants: a refusal
 * is an HTTP error status with a type and a message and serialises to
 * OpenAI's error JSON with that status as its code; an accepted request
 * fits the context (every tokenised prompt plus max_tokens within
 * max_model_len), has 1..SIM_MAX_CHOICES choices in all, a salt only if it
 * is one vLLM accepts, and a non-zero priority only under priority
 * scheduling. */
#include <jansson.h>
#include <string.h>

#include "sim/openai_request.h"
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
	FUZZ_CHECK(r->max_tokens >= 1, "max_tokens 0");
	FUZZ_CHECK(r->prompts, "no prompts");
	for (uint32_t k = 0; k < r->n_prompts; k++) {
		uint64_t n = r->prompts[k].n;
		FUZZ_CHECK(n >= 1, "prompt %u is empty", k);
		FUZZ_CHECK(n + r->max_tokens <= lim->max_model_len,
			   "prompt %u: %llu tokens + max_tokens %u > max_model_len %u", k,
			   (unsigned long long)n, r->max_tokens, lim->max_model_len);
	}
	if (r->has_salt) {
		size_t len = strnlen(r->cache_salt, sizeof(r->cache_salt));
		FUZZ_CHECK(len < sizeof(r->cache_salt), "salt not terminated");
		FUZZ_CHECK(sim_cache_salt_valid(r->cache_salt, len), "invalid salt accepted");
	}
	FUZZ_CHECK(!r->priority || lim->priority_scheduling, "priority without priority scheduling");
	FUZZ_CHECK(!r->include_usage || r->stream, "include_usage without a stream");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t opt = fuzz_take_byte(&data, &size);
	struct sim_request_limits lim = {
		.model = opt & 2 ? "llama-3.3-70b" : NULL,
		.max_model_len = opt & 4 ? 64 : 131072,
		.priority_scheduling = opt & 8,
		.default_max_tokens = opt & 16 ? 1 : 256,
	};
	enum sim_api api = opt & 1 ? SIM_API_COMPLETIONS : SIM_API_CHAT;
	struct sim_request r;
	struct sim_error err;
	/* a private copy so ASan sees any read past the body */
	char *body = malloc(size ? size : 1);

	memcpy(body, data, size);
	memset(&err, 0, sizeof(err));
	if (sim_request_parse(api, body, size, &lim, &r, &err)) {
		check_error(&err);
		FUZZ_CHECK(!r.prompts && !r.n_prompts, "refused request keeps prompts");
	} else {
		check_request(&r, &lim);
		sim_request_free(&r);
	}
	free(body);
	return 0;
}
