/* responses_response.c — see responses_response.h. */
#include "responses_response.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const event_types[] = {
	[SIM_RESP_CREATED] = "response.created",
	[SIM_RESP_IN_PROGRESS] = "response.in_progress",
	[SIM_RESP_ITEM_ADDED] = "response.output_item.added",
	[SIM_RESP_PART_ADDED] = "response.content_part.added",
	[SIM_RESP_TEXT_DELTA] = "response.output_text.delta",
	[SIM_RESP_TEXT_DONE] = "response.output_text.done",
	[SIM_RESP_PART_DONE] = "response.content_part.done",
	[SIM_RESP_ITEM_DONE] = "response.output_item.done",
	[SIM_RESP_COMPLETED] = "response.completed",
};

static json_t *str_or_null(const char *s)
{
	return s ? json_string(s) : json_null();
}

/* An output_text part; `logprobs` is [] while streaming, null when done
 * (the two shapes vLLM's events carry). */
static json_t *text_part(const char *text, size_t len, bool stream_logprobs)
{
	return json_pack("{s:[],s:s%,s:s,s:o}", "annotations", "text", text ? text : "",
			 text ? len : 0, "type", "output_text", "logprobs",
			 stream_logprobs ? json_array() : json_null());
}

static json_t *message_item(const struct sim_resp_object *r, bool done)
{
	json_t *content = json_array();

	if (done && r->text_len)
		json_array_append_new(content, text_part(r->text, r->text_len, false));
	return json_pack("{s:s,s:o,s:s,s:s,s:s}", "id", r->msg_id, "content", content, "role",
			 "assistant", "status", done ? "completed" : "in_progress", "type",
			 "message");
}

static json_t *usage(const struct sim_resp_object *r)
{
	if (!r->has_usage)
		return json_null();
	return json_pack("{s:I,s:{s:I,s:[I],s:[I]},s:I,s:{s:i,s:i,s:[I],s:[i]},s:I}",
			 "input_tokens", (json_int_t)r->input_tokens, "input_tokens_details",
			 "cached_tokens", (json_int_t)r->cached_tokens, "input_tokens_per_turn",
			 (json_int_t)r->input_tokens, "cached_tokens_per_turn",
			 (json_int_t)r->cached_tokens, "output_tokens",
			 (json_int_t)r->output_tokens, "output_tokens_details", "reasoning_tokens", 0,
			 "tool_output_tokens", 0, "output_tokens_per_turn",
			 (json_int_t)r->output_tokens, "tool_output_tokens_per_turn", 0,
			 "total_tokens", (json_int_t)(r->input_tokens + r->output_tokens));
}

static json_t *response(const struct sim_resp_object *r)
{
	bool incomplete = !strcmp(r->status, "incomplete");
	json_t *output = json_array();

	if (r->text && strcmp(r->status, "in_progress"))
		json_array_append_new(output, message_item(r, true));
	/* vLLM's ResponsesResponse, field for field */
	return json_pack("{s:s,s:I,s:o,s:o,s:n,s:s,s:s,s:o,s:b,s:f,s:s,s:[],s:f,s:b,s:I,s:n,"
			 "s:n,s:n,s:n,s:s,s:s,s:n,s:n,s:s,s:o,s:n}",
			 "id", r->id, "created_at", (json_int_t)r->created_at,
			 "incomplete_details",
			 incomplete ? json_pack("{s:s}", "reason", "max_output_tokens") : json_null(),
			 "instructions", str_or_null(r->instructions), "metadata", "model", r->model,
			 "object", "response", "output", output, "parallel_tool_calls", 1,
			 "temperature", r->temperature, "tool_choice", "auto", "tools", "top_p",
			 r->top_p, "background", 0, "max_output_tokens",
			 (json_int_t)r->max_output_tokens, "max_tool_calls", "previous_response_id",
			 "prompt", "reasoning", "service_tier", "auto", "status", r->status, "text",
			 "top_logprobs", "truncation", "disabled", "usage", usage(r), "user");
}

static char *dump(json_t *o)
{
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;

	json_decref(o);
	return s;
}

char *sim_responses_object(const struct sim_resp_object *r)
{
	return dump(response(r));
}

char *sim_responses_event(const struct sim_resp_object *r, enum sim_resp_event ev,
			  uint64_t sequence_number, const char *delta, size_t delta_len)
{
	const char *type = event_types[ev];
	json_t *o;

	switch (ev) {
	case SIM_RESP_CREATED:
	case SIM_RESP_IN_PROGRESS:
	case SIM_RESP_COMPLETED:
		o = json_pack("{s:o}", "response", response(r));
		break;
	case SIM_RESP_ITEM_ADDED:
	case SIM_RESP_ITEM_DONE:
		o = json_pack("{s:o,s:i}", "item", message_item(r, ev == SIM_RESP_ITEM_DONE),
			      "output_index", 0);
		break;
	case SIM_RESP_PART_ADDED:
	case SIM_RESP_PART_DONE:
		o = json_pack("{s:i,s:s,s:i,s:o}", "content_index", 0, "item_id", r->msg_id,
			      "output_index", 0, "part",
			      ev == SIM_RESP_PART_ADDED ? text_part("", 0, true)
							: text_part(r->text, r->text_len, false));
		break;
	case SIM_RESP_TEXT_DELTA:
		o = json_pack("{s:i,s:s%,s:s,s:[],s:i}", "content_index", 0, "delta",
			      delta ? delta : "", delta ? delta_len : 0, "item_id", r->msg_id,
			      "logprobs", "output_index", 0);
		break;
	case SIM_RESP_TEXT_DONE:
	default:
		o = json_pack("{s:i,s:s,s:[],s:i,s:s%}", "content_index", 0, "item_id", r->msg_id,
			      "logprobs", "output_index", 0, "text", r->text ? r->text : "",
			      r->text ? r->text_len : 0);
		break;
	}
	if (!o)
		return NULL;
	json_object_set_new(o, "sequence_number", json_integer((json_int_t)sequence_number));
	json_object_set_new(o, "type", json_string(type));
	char *data = dump(o), *out = NULL;
	if (data && asprintf(&out, "event: %s\ndata: %s\n\n", type, data) < 0)
		out = NULL;
	free(data);
	return out;
}
