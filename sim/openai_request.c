/* openai_request.c — generation requests and vLLM-style validation; see
 * openai_request.h. */
#include "openai_request.h"

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/chat_prompt.h"
#include "sim/responses_request.h"

#define COMPLETIONS_DEFAULT_MAX_TOKENS 16 /* OpenAI's and vLLM's legacy default */

/* ---- completions' prompt ---------------------------------------------------- */

static bool is_token_array(json_t *a)
{
	size_t i;
	json_t *v;

	if (!json_is_array(a) || !json_array_size(a))
		return false;
	json_array_foreach(a, i, v)
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) > (json_int_t)UINT32_MAX)
			return false;
	return true;
}

/* prompt: "text" | ["text", ...] | [id, ...] | [[id, ...], ...]. Sets
 * r->n_prompts; *items is the array of prompts, or NULL for one. */
static int check_prompt(json_t *root, struct sim_request *r, json_t **items,
			struct sim_error *err)
{
	json_t *p = json_object_get(root, "prompt");
	size_t i;
	json_t *v;

	*items = NULL;
	if (!p || json_is_null(p))
		return sim_error_set(err, 400, "prompt", "prompt: field required");
	if (json_is_string(p) || is_token_array(p)) {
		r->n_prompts = 1;
	} else if (json_is_array(p) && json_array_size(p)) {
		json_array_foreach(p, i, v)
			if (!(json_is_string(v) && json_string_length(v)) && !is_token_array(v))
				return sim_error_set(err, 400, "prompt",
						     "prompt[%zu] must be a non-empty string or "
						     "array of token ids", i);
		r->n_prompts = (uint32_t)(json_array_size(p) < SIM_MAX_CHOICES + 1
						  ? json_array_size(p) : SIM_MAX_CHOICES + 1);
		*items = p;
	} else {
		return sim_error_set(err, 400, "prompt",
				     "prompt must be a string, an array of strings, or an array "
				     "of token ids");
	}
	if (json_is_string(p) && !json_string_length(p))
		return sim_error_set(err, 400, "prompt", "prompt must not be empty");
	return 0;
}

static int tokenize_prompt(json_t *p, struct sim_tokens *t)
{
	if (json_is_string(p))
		return sim_tokens_text(t, json_string_value(p), json_string_length(p), UINT32_MAX);
	size_t i;
	json_t *v;
	json_array_foreach(p, i, v)
		if (sim_tokens_push(t, (uint32_t)json_integer_value(v), UINT32_MAX))
			return -1;
	return 0;
}

/* ---- fields ------------------------------------------------------------------ */

struct out_cap {
	long long max_tokens;
	bool set;
	long long truncate; /* truncate_prompt_tokens: 0 = none, -1 = max_model_len */
	bool keep_first;    /* truncation_side "right" */
};

static int read_stream(json_t *root, enum sim_api api, const struct sim_request_limits *lim,
		       struct sim_request *r, struct sim_error *err)
{
	json_t *so = json_object_get(root, "stream_options");

	if (sim_field_bool(root, "stream", &r->stream, err))
		return -1;
	/* ResponsesRequest has no stream_options: vLLM ignores it there */
	if (api != SIM_API_RESPONSES && so && !json_is_null(so)) {
		bool continuous = false;
		if (!json_is_object(so))
			return sim_error_set(err, 400, "stream_options",
					     "stream_options must be an object");
		if (!r->stream)
			return sim_error_set(err, 400, "stream_options",
					     "Stream options can only be defined when `stream=True`.");
		if (sim_field_bool(so, "include_usage", &r->include_usage, err) ||
		    sim_field_bool(so, "continuous_usage_stats", &continuous, err))
			return -1;
		/* vLLM: continuous usage only rides on include_usage */
		r->continuous_usage = r->include_usage && continuous;
	}
	if (lim->force_include_usage && r->stream && api != SIM_API_RESPONSES)
		r->include_usage = r->continuous_usage = true;
	return 0;
}

/* n, best_of and beam search: how many sequences the engine runs. */
static int read_sequences(json_t *root, enum sim_api api, const struct sim_request_limits *lim,
			  struct sim_request *r, struct sim_error *err)
{
	long long v;
	bool present, beam = false;

	r->n = 1;
	if (api == SIM_API_RESPONSES)
		return 0; /* no n in ResponsesRequest */
	if (sim_field_int(root, "n", 1, SIM_MAX_CHOICES, &v, &present, err))
		return -1;
	if (present)
		r->n = (uint32_t)v;
	if (sim_field_bool(root, "use_beam_search", &beam, err))
		return -1;
	if (beam)
		return sim_error_set(err, 400, "use_beam_search",
				     "use_beam_search is not simulated by fairgate-sim");
	/* vLLM >= 0.12 dropped best_of from its protocol (an ignored field);
	 * 0.8-0.11's V1 engine refused anything but 1 */
	if (!lim->refuse_best_of)
		return 0;
	if (sim_field_int(root, "best_of", LLONG_MIN, LLONG_MAX, &v, &present, err))
		return -1;
	if (!present)
		return 0;
	if (v < 1)
		return sim_error_set(err, 400, "best_of", "best_of must be at least 1, got %lld.", v);
	if (v < r->n)
		return sim_error_set(err, 400, "best_of",
				     "best_of must be greater than or equal to n, got n=%u and "
				     "best_of=%lld.", r->n, v);
	if (v > 1)
		return sim_error_set(err, 400, "best_of", "vLLM V1 does not yet support best_of.");
	return 0;
}

/* What vLLM refuses without a response store (VLLM_ENABLE_RESPONSES_API_STORE
 * unset, its default): the sim stores nothing either. */
static int responses_unsupported(json_t *root, struct sim_error *err)
{
	json_t *prev = json_object_get(root, "previous_response_id");
	json_t *bg = json_object_get(root, "background"), *store = json_object_get(root, "store");
	json_t *prompt = json_object_get(root, "prompt");

	if (prompt && !json_is_null(prompt))
		return sim_error_set(err, 400, "prompt", "prompt template is not supported");
	if (json_is_true(bg)) {
		if (json_is_false(store))
			return sim_error_set(err, 400, NULL,
					     "background can only be used when `store` is true");
		return sim_error_set(err, 400, "background",
				     "This vLLM engine does not support `store=True` and therefore "
				     "does not support the background mode. To enable these "
				     "features, set the environment variable "
				     "`VLLM_ENABLE_RESPONSES_API_STORE=1` when launching the vLLM "
				     "server.");
	}
	if (json_is_string(prev))
		return sim_error_set(err, 404, "response_id", "Response with id '%s' not found.",
				     json_string_value(prev));
	return 0;
}

static int read_output_cap(json_t *root, enum sim_api api, const struct sim_request_limits *lim,
			   struct sim_request *r, struct out_cap *cap, struct sim_error *err)
{
	long long v;
	bool present;

	if (api == SIM_API_RESPONSES) {
		if (sim_field_int(root, "max_output_tokens", 1, INT32_MAX, &cap->max_tokens,
				  &cap->set, err))
			return -1;
	} else {
		if (sim_field_int(root, "max_tokens", 1, INT32_MAX, &cap->max_tokens, &cap->set,
				  err))
			return -1;
		if (api == SIM_API_CHAT) {
			if (sim_field_int(root, "max_completion_tokens", 1, INT32_MAX, &v, &present,
					  err))
				return -1;
			if (present) {
				cap->max_tokens = v;
				cap->set = true;
			}
		}
		if (sim_field_int(root, "truncate_prompt_tokens", -1, INT32_MAX, &v, &present, err))
			return -1;
		if (present && v) {
			cap->truncate = v;
			if (v > (long long)lim->max_model_len)
				return sim_error_set(err, 400, "truncate_prompt_tokens",
						     "truncate_prompt_tokens value (%lld) is greater "
						     "than max_model_len (%u). Please request a "
						     "smaller truncation size.", v, lim->max_model_len);
		}
		const char *side = json_string_value(json_object_get(root, "truncation_side"));
		cap->keep_first = side && !strcmp(side, "right");
	}
	r->temperature = r->top_p = 1.0;
	if (api == SIM_API_RESPONSES && responses_unsupported(root, err))
		return -1;
	if (api == SIM_API_RESPONSES) {
		const char *keys[2] = { "temperature", "top_p" };
		double *dst[2] = { &r->temperature, &r->top_p };
		for (int k = 0; k < 2; k++) {
			json_t *x = json_object_get(root, keys[k]);
			if (json_is_number(x))
				*dst[k] = json_number_value(x);
			else if (x && !json_is_null(x))
				return sim_error_set(err, 400, keys[k], "%s must be a number",
						     keys[k]);
		}
	}
	if (sim_field_int(root, "min_tokens", 0, INT32_MAX, &v, &present, err) ||
	    sim_field_bool(root, "ignore_eos", &r->ignore_eos, err))
		return -1;
	if (present)
		r->min_tokens = (uint32_t)v;
	return 0;
}

/* ---- lengths ----------------------------------------------------------------- */

static uint64_t longest_prompt(const struct sim_request *r)
{
	uint64_t n = 0;

	for (uint32_t k = 0; k < r->n_prompts; k++)
		if (r->prompts[k].n > n)
			n = r->prompts[k].n;
	return n;
}

static int check_lengths(const struct sim_request_limits *lim, enum sim_api api,
			 uint64_t prompt, uint64_t max_tokens, bool max_set, struct sim_error *err)
{
	const char *where = api == SIM_API_CHAT ? "messages" : "prompt";

	if (api == SIM_API_RESPONSES) {
		/* the renderer's check, then the serving layer's */
		if (max_set && prompt + max_tokens > lim->max_model_len)
			return sim_error_set(err, 400, "max_output_tokens",
					     "This model's maximum context length is %u tokens. "
					     "However, you requested %llu output tokens and your "
					     "prompt contains at least %llu input tokens, for a total "
					     "of at least %llu tokens. Please reduce the length of "
					     "the input prompt or the number of requested output "
					     "tokens.", lim->max_model_len,
					     (unsigned long long)max_tokens,
					     (unsigned long long)prompt + (prompt < lim->max_model_len ? 0 : 1),
					     (unsigned long long)(prompt + max_tokens));
		if (prompt >= lim->max_model_len)
			return sim_error_set(err, 400, "input",
					     "The engine prompt length %llu exceeds the max_model_len "
					     "%u. Please reduce prompt.", (unsigned long long)prompt,
					     lim->max_model_len);
		return 0;
	}
	if (prompt >= lim->max_model_len)
		return sim_error_set(err, 400, where,
				     "This model's maximum context length is %u tokens. However, "
				     "you requested %llu tokens in the %s. Please reduce the length "
				     "of the %s.", lim->max_model_len, (unsigned long long)prompt,
				     where, where);
	if (prompt + max_tokens > lim->max_model_len)
		return sim_error_set(err, 400, "max_tokens",
				     "This model's maximum context length is %u tokens. However, "
				     "you requested %llu tokens (%llu in the %s, %llu in the "
				     "completion). Please reduce the length of the %s or completion.",
				     lim->max_model_len, (unsigned long long)(prompt + max_tokens),
				     (unsigned long long)prompt, where,
				     (unsigned long long)max_tokens, where);
	return 0;
}

/* ---- the request ------------------------------------------------------------- */

static int render_prompts(json_t *root, enum sim_api api, const struct sim_request_limits *lim,
			  struct sim_request *r, struct sim_error *err)
{
	struct sim_prompt p = { 0 };
	struct sim_chat_opts opts;
	json_t *items;
	int rc;

	if (api == SIM_API_COMPLETIONS) {
		if (check_prompt(root, r, &items, err))
			return -1;
		r->prompts = calloc(r->n_prompts, sizeof(*r->prompts));
		if (!r->prompts)
			return sim_error_set(err, 500, NULL, "out of memory");
		for (uint32_t k = 0; k < r->n_prompts; k++)
			if (tokenize_prompt(items ? json_array_get(items, k)
						  : json_object_get(root, "prompt"),
					    &r->prompts[k]))
				return sim_error_set(err, 500, NULL, "out of memory");
		return 0;
	}
	if (api == SIM_API_CHAT)
		rc = sim_chat_opts_parse(root, &opts, err) ||
		     sim_chat_render_messages(root, &opts, lim, &p, err);
	else
		rc = sim_responses_render(root, lim, &p, &r->instructions, err);
	if (rc) {
		sim_prompt_free(&p);
		return -1;
	}
	r->prompts = calloc(1, sizeof(*r->prompts));
	if (!r->prompts) {
		sim_prompt_free(&p);
		return sim_error_set(err, 500, NULL, "out of memory");
	}
	r->n_prompts = 1;
	r->prompts[0] = p.tokens;
	memcpy(r->media_tokens, p.media_tokens, sizeof(r->media_tokens));
	return 0;
}

int sim_request_parse(enum sim_api api, const char *body, size_t len,
		      const struct sim_request_limits *lim, struct sim_request *r,
		      struct sim_error *err)
{
	json_t *root;
	struct out_cap cap = { 0 };

	memset(r, 0, sizeof(*r));
	r->api = api;
	if (sim_json_load(body, len, &root, err))
		return -1;
	if (sim_field_model(root, lim, err) || read_output_cap(root, api, lim, r, &cap, err) ||
	    read_sequences(root, api, lim, r, err) || read_stream(root, api, lim, r, err) ||
	    sim_field_salt(root, &r->has_salt, r->cache_salt, err) ||
	    sim_field_priority(root, lim, &r->priority, err) ||
	    render_prompts(root, api, lim, r, err))
		goto fail;
	if ((uint64_t)r->n_prompts * r->n > SIM_MAX_CHOICES) {
		sim_error_set(err, 400, "n", "prompts x n must be at most %d in fairgate-sim",
			      SIM_MAX_CHOICES);
		goto fail;
	}
	if (cap.truncate) {
		uint32_t keep = cap.truncate < 0 ? lim->max_model_len : (uint32_t)cap.truncate;
		uint64_t media = 0;
		for (int m = 0; m < SIM_MM_N; m++)
			media += r->media_tokens[m];
		/* cutting into a media item's placeholder tokens leaves the
		 * engine features it has no positions for: refused, not guessed */
		if (media && keep < r->prompts[0].n && keep < media) {
			sim_error_set(err, 400, "truncate_prompt_tokens",
				      "truncate_prompt_tokens (%u) would cut into the prompt's %llu "
				      "multimodal placeholder tokens.",
				      keep, (unsigned long long)media);
			goto fail;
		}
		for (uint32_t k = 0; k < r->n_prompts; k++) {
			if (cap.keep_first && r->prompts[k].n > keep)
				r->prompts[k].n = keep;
			else
				sim_tokens_keep_last(&r->prompts[k], keep);
		}
	}

	uint64_t prompt_max = longest_prompt(r);
	long long max_tokens = cap.max_tokens;
	if (!cap.set) {
		uint64_t room = prompt_max < lim->max_model_len ? lim->max_model_len - prompt_max : 0;
		max_tokens = api == SIM_API_COMPLETIONS ? COMPLETIONS_DEFAULT_MAX_TOKENS
							: lim->default_max_tokens;
		if (api != SIM_API_COMPLETIONS && (uint64_t)max_tokens > room)
			max_tokens = (long long)room;
		if (max_tokens < 1)
			max_tokens = 1;
	}
	if (check_lengths(lim, api, prompt_max, (uint64_t)max_tokens, cap.set, err))
		goto fail;
	r->max_tokens = (uint32_t)max_tokens;
	if (r->min_tokens > r->max_tokens) {
		sim_error_set(err, 400, "min_tokens",
			      "min_tokens must be less than or equal to max_tokens=%u, got %u.",
			      r->max_tokens, r->min_tokens);
		goto fail;
	}
	json_decref(root);
	return 0;
fail:
	json_decref(root);
	sim_request_free(r);
	return -1;
}

void sim_request_free(struct sim_request *r)
{
	if (r->prompts)
		for (uint32_t k = 0; k < r->n_prompts; k++)
			sim_tokens_free(&r->prompts[k]);
	free(r->prompts);
	free(r->instructions);
	r->prompts = NULL;
	r->instructions = NULL;
	r->n_prompts = 0;
}
