/* openai_response.c — see openai_response.h. */
#include "openai_response.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* prompt_tokens_details as vLLM's --enable-prompt-tokens-details fills it:
 * cached tokens only (media placeholders are not broken out). */
static json_t *details_json(const struct sim_usage *u)
{
	if (!u->details)
		return json_null();
	return json_pack("{s:I}", "cached_tokens", (json_int_t)u->cached_tokens);
}

static json_t *usage_json(const struct sim_usage *u)
{
	json_t *details = details_json(u);

	return json_pack("{s:I,s:I,s:I,s:o}", "prompt_tokens", (json_int_t)u->prompt_tokens,
			 "total_tokens", (json_int_t)(u->prompt_tokens + u->completion_tokens),
			 "completion_tokens", (json_int_t)u->completion_tokens,
			 "prompt_tokens_details", details);
}

static json_t *envelope(const struct sim_resp_meta *m, bool chunk)
{
	const char *object = m->api == SIM_API_CHAT
				     ? (chunk ? "chat.completion.chunk" : "chat.completion")
				     : "text_completion";

	return json_pack("{s:s,s:s,s:I,s:s}", "id", m->id, "object", object, "created",
			 (json_int_t)m->created, "model", m->model);
}

static json_t *text_or_null(const char *s)
{
	return s ? json_string(s) : json_null();
}

static char *dump(json_t *o, bool sse)
{
	char *body = o ? json_dumps(o, JSON_COMPACT) : NULL;
	char *out = NULL;

	json_decref(o);
	if (!body || !sse)
		return body;
	if (asprintf(&out, "data: %s\n\n", body) < 0)
		out = NULL;
	free(body);
	return out;
}

char *sim_resp_full(const struct sim_resp_meta *m, const struct sim_resp_choice *choices,
		    uint32_t n, const struct sim_usage *u)
{
	json_t *o = envelope(m, false);
	json_t *arr = json_array();

	for (uint32_t i = 0; i < n; i++) {
		json_t *text = json_stringn(choices[i].text ? choices[i].text : "", choices[i].len);
		json_t *c;
		if (m->api == SIM_API_CHAT)
			c = json_pack("{s:I,s:{s:s,s:o,s:[]},s:n,s:o,s:n}", "index", (json_int_t)i,
				      "message", "role", "assistant", "content", text, "tool_calls",
				      "logprobs", "finish_reason",
				      text_or_null(choices[i].finish_reason), "stop_reason");
		else
			c = json_pack("{s:I,s:o,s:n,s:o,s:n}", "index", (json_int_t)i, "text", text,
				      "logprobs", "finish_reason",
				      text_or_null(choices[i].finish_reason), "stop_reason");
		json_array_append_new(arr, c);
	}
	json_object_set_new(o, "choices", arr);
	json_object_set_new(o, "usage", usage_json(u));
	return dump(o, false);
}

char *sim_resp_chunk(const struct sim_resp_meta *m, uint32_t index, const char *role,
		     const char *text, size_t len, const char *finish_reason,
		     const struct sim_usage *running)
{
	json_t *o = envelope(m, true);
	json_t *c;

	if (m->api == SIM_API_CHAT) {
		json_t *delta = json_object();
		if (role)
			json_object_set_new(delta, "role", json_string(role));
		if (text)
			json_object_set_new(delta, "content", json_stringn(text, len));
		c = json_pack("{s:I,s:o,s:n,s:o}", "index", (json_int_t)index, "delta", delta,
			      "logprobs", "finish_reason", text_or_null(finish_reason));
	} else {
		c = json_pack("{s:I,s:s%,s:n,s:o}", "index", (json_int_t)index, "text",
			      text ? text : "", text ? len : 0, "logprobs", "finish_reason",
			      text_or_null(finish_reason));
	}
	json_object_set_new(o, "choices", json_pack("[o]", c));
	if (running)
		json_object_set_new(o, "usage",
				    json_pack("{s:I,s:I,s:I}", "prompt_tokens",
					      (json_int_t)running->prompt_tokens, "completion_tokens",
					      (json_int_t)running->completion_tokens, "total_tokens",
					      (json_int_t)(running->prompt_tokens +
							   running->completion_tokens)));
	return dump(o, true);
}

char *sim_resp_usage_chunk(const struct sim_resp_meta *m, const struct sim_usage *u)
{
	json_t *o = envelope(m, true);

	json_t *usage = usage_json(u);

	/* vLLM writes this chunk with exclude_none: no null details */
	if (json_is_null(json_object_get(usage, "prompt_tokens_details")))
		json_object_del(usage, "prompt_tokens_details");
	json_object_set_new(o, "choices", json_array());
	json_object_set_new(o, "usage", usage);
	return dump(o, true);
}
