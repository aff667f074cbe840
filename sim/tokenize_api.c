/* tokenize_api.c — see tokenize_api.h. */
#include "tokenize_api.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "sim/chat_prompt.h"

static char *dump(json_t *o, struct sim_error *err)
{
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;

	json_decref(o);
	if (!s)
		sim_error_set(err, 500, NULL, "out of memory");
	return s;
}

static json_t *token_strs(const struct sim_tokens *t)
{
	json_t *a = json_array();

	for (uint32_t i = 0; a && i < t->n; i++) {
		char buf[SIM_TOKEN_STR_MAX];
		sim_token_str(t->ids[i], buf);
		if (json_array_append_new(a, json_string(buf))) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

static char *tokenize_answer(const struct sim_tokens *t, bool strs, uint32_t max_model_len,
			     struct sim_error *err)
{
	json_t *ids = json_array();
	json_t *o;

	for (uint32_t i = 0; ids && i < t->n; i++)
		if (json_array_append_new(ids, json_integer(t->ids[i]))) {
			json_decref(ids);
			ids = NULL;
		}
	if (!ids)
		return dump(NULL, err);
	o = json_pack("{s:I,s:I,s:o,s:o}", "count", (json_int_t)t->n, "max_model_len",
		      (json_int_t)max_model_len, "tokens", ids, "token_strs",
		      strs ? token_strs(t) : json_null());
	return dump(o, err);
}

char *sim_tokenize(const char *body, size_t len, const struct sim_request_limits *lim,
		   struct sim_error *err)
{
	json_t *root;
	struct sim_prompt p = { 0 };
	bool strs = false, special = true;
	char *out = NULL;

	if (sim_json_load(body, len, &root, err))
		return NULL;
	if (sim_field_model(root, lim, err) ||
	    sim_field_bool(root, "return_token_strs", &strs, err) ||
	    sim_field_bool(root, "add_special_tokens", &special, err))
		goto done;
	if (json_object_get(root, "messages")) {
		struct sim_chat_opts o;
		json_t *tmpl = json_object_get(root, "chat_template");
		if (tmpl && !json_is_null(tmpl)) {
			/* vLLM's answer without --trust-request-chat-template */
			sim_error_set(err, 400, NULL,
				      "Chat template is passed with request, but "
				      "--trust-request-chat-template is not set. Refused request "
				      "with untrusted chat template.");
			goto done;
		}
		if (sim_chat_opts_parse(root, &o, err) ||
		    sim_chat_render_messages(root, &o, lim, &p, err))
			goto done;
	} else {
		json_t *prompt = json_object_get(root, "prompt");
		if (!prompt || json_is_null(prompt)) {
			sim_error_set(err, 400, NULL,
				      "Either `prompt` or `messages` should be provided.");
			goto done;
		}
		if (!json_is_string(prompt)) {
			sim_error_set(err, 400, "prompt", "prompt must be a string");
			goto done;
		}
		if (sim_tokens_text(&p.tokens, json_string_value(prompt), json_string_length(prompt),
				    UINT32_MAX)) {
			sim_error_set(err, 500, NULL, "out of memory");
			goto done;
		}
	}
	out = tokenize_answer(&p.tokens, strs, lim->max_model_len, err);
done:
	sim_prompt_free(&p);
	json_decref(root);
	return out;
}

char *sim_detokenize_body(const char *body, size_t len, const struct sim_request_limits *lim,
			  struct sim_error *err)
{
	json_t *root, *tokens, *v;
	struct sim_tokens ids = { 0 };
	char *out = NULL;
	size_t i;

	if (sim_json_load(body, len, &root, err))
		return NULL;
	if (sim_field_model(root, lim, err))
		goto done;
	tokens = json_object_get(root, "tokens");
	if (!json_is_array(tokens)) {
		sim_error_set(err, 400, "tokens", tokens ? "tokens must be an array of token ids"
							 : "tokens: field required");
		goto done;
	}
	json_array_foreach(tokens, i, v) {
		if (!json_is_integer(v) || json_integer_value(v) < 0) {
			sim_error_set(err, 400, "tokens",
				      "tokens[%zu] must be an integer greater than or equal to 0", i);
			goto done;
		}
		if (json_integer_value(v) > (json_int_t)UINT32_MAX) {
			sim_error_set(err, 400, "tokens",
				      "Token id %lld is out of vocabulary (fairgate-sim's ids are "
				      "32-bit)", (long long)json_integer_value(v));
			goto done;
		}
		if (sim_tokens_push(&ids, (uint32_t)json_integer_value(v), UINT32_MAX)) {
			sim_error_set(err, 500, NULL, "out of memory");
			goto done;
		}
	}
	size_t tl;
	char *text = sim_detokenize(ids.ids, ids.n, &tl);
	if (!text) {
		sim_error_set(err, 500, NULL, "out of memory");
		goto done;
	}
	out = dump(json_pack("{s:s%}", "prompt", text, tl), err);
	free(text);
done:
	sim_tokens_free(&ids);
	json_decref(root);
	return out;
}
