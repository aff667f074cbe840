/* responses_request.c — see responses_request.h. */
#include "responses_request.h"

#include <stdlib.h>
#include <string.h>

/* One input item as a chat message; -1 with *err when the sim cannot take it. */
static int item_message(json_t *item, size_t i, struct sim_chat_msg *m, struct sim_error *err)
{
	const char *type = json_string_value(json_object_get(item, "type"));
	const char *role = json_string_value(json_object_get(item, "role"));

	if (!json_is_object(item))
		return sim_error_set(err, 400, "input", "input[%zu] must be an object", i);
	if (!type || !strcmp(type, "message")) {
		if (!role || !*role)
			return sim_error_set(err, 400, "input",
					     "input[%zu] must be a message with a role", i);
		json_t *content = json_object_get(item, "content");
		if (content && !json_is_null(content) && !json_is_string(content) &&
		    !json_is_array(content))
			return sim_error_set(err, 400, "input",
					     "input[%zu].content must be a string or an array of "
					     "parts", i);
		m->role = role;
		m->content = content;
		return 0;
	}
	const char *field = !strcmp(type, "function_call") ? "arguments"
			    : !strcmp(type, "function_call_output") ? "output" : NULL;
	if (!field)
		return sim_error_set(err, 400, "input",
				     "input[%zu]: item type '%s' is not supported by fairgate-sim",
				     i, type);
	m->content = json_object_get(item, field);
	if (!json_is_string(m->content))
		return sim_error_set(err, 400, "input", "input[%zu].%s must be a string", i, field);
	m->role = field[0] == 'a' ? "assistant" : "tool";
	return 0;
}

static bool continues_last(json_t *input)
{
	json_t *last = json_array_get(input, json_array_size(input) - 1);
	const char *type = json_string_value(json_object_get(last, "type"));
	const char *status = json_string_value(json_object_get(last, "status"));

	if (!last || (type && strcmp(type, "message")) || !status)
		return false;
	return !strcmp(status, "in_progress") || !strcmp(status, "incomplete");
}

int sim_responses_render(json_t *root, const struct sim_request_limits *lim,
			 struct sim_prompt *out, char **instructions, struct sim_error *err)
{
	json_t *input = json_object_get(root, "input");
	json_t *ins = json_object_get(root, "instructions");
	struct sim_chat_opts opts = { .add_generation_prompt = true };
	struct sim_chat_msg *msgs;
	size_t n = 0, i;
	json_t *item;

	memset(out, 0, sizeof(*out));
	*instructions = NULL;
	if (ins && !json_is_null(ins) && !json_is_string(ins))
		return sim_error_set(err, 400, "instructions", "instructions must be a string");
	if (!input || json_is_null(input))
		return sim_error_set(err, 400, "input", "input: field required");
	if (!json_is_string(input) && !json_is_array(input))
		return sim_error_set(err, 400, "input",
				     "input must be a string or an array of input items");
	msgs = calloc(1 + (json_is_array(input) ? json_array_size(input) : 1), sizeof(*msgs));
	if (!msgs)
		return sim_error_set(err, 500, NULL, "out of memory");
	/* vLLM adds a system message only for non-empty instructions */
	if (json_is_string(ins) && json_string_length(ins)) {
		*instructions = malloc(json_string_length(ins) + 1);
		if (!*instructions) {
			free(msgs);
			return sim_error_set(err, 500, NULL, "out of memory");
		}
		memcpy(*instructions, json_string_value(ins), json_string_length(ins) + 1);
		msgs[n++] = (struct sim_chat_msg){ .role = "system", .content = ins };
	}
	if (json_is_string(input)) {
		msgs[n++] = (struct sim_chat_msg){ .role = "user", .content = input };
	} else {
		json_array_foreach(input, i, item) {
			if (item_message(item, i, &msgs[n], err)) {
				free(msgs);
				return -1;
			}
			n++;
		}
		if (continues_last(input)) {
			opts.add_generation_prompt = false;
			opts.continue_final_message = true;
		}
	}
	int rc = sim_chat_render(msgs, n, &opts, lim, "input", out, err);
	free(msgs);
	return rc;
}
