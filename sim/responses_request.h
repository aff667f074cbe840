/* responses_request.h — /v1/responses' `instructions` and `input` as the
 * conversation vLLM builds from them (construct_input_messages), rendered
 * by chat_prompt.h:
 *
 *   instructions            a system message, first
 *   input: "text"           one user message
 *   input: [items]          in order:
 *     {"type":"message"} or an item with a role: role + content (a string
 *                           or parts: input_text, output_text, input_image,
 *                           input_audio, ...)
 *     function_call         an assistant message whose text is `arguments`
 *     function_call_output  a tool message whose text is `output`
 *
 * Any other item type is refused (400). When the last item is a message
 * whose status is "in_progress" or "incomplete" the model continues it
 * (continue_final_message), as vLLM does; otherwise the generation prompt
 * is added.
 *
 * Pure: JSON in, tokens or an OpenAI-shaped error out.
 */
#ifndef FAIRGATE_SIM_RESPONSES_REQUEST_H
#define FAIRGATE_SIM_RESPONSES_REQUEST_H

#include <jansson.h>

#include "sim/chat_prompt.h"
#include "sim/request_fields.h"

/* Render root's instructions and input into out (free with
 * sim_prompt_free, also on error); *instructions is a malloc'd copy, or
 * NULL when the request has none. */
int sim_responses_render(json_t *root, const struct sim_request_limits *lim,
			 struct sim_prompt *out, char **instructions, struct sim_error *err);

#endif
