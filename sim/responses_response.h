/* responses_response.h — /v1/responses' answers as vLLM writes them: the
 * response object (object "response", status, output message with one
 * output_text part, incomplete_details when max_output_tokens cut it,
 * usage with input/output token details) and the streamed events, each as
 * "event: TYPE\ndata: {...}\n\n" with a sequence_number counting from 0:
 *
 *   response.created, response.in_progress            (status in_progress)
 *   response.output_item.added, response.content_part.added
 *   response.output_text.delta ...                    (one per token)
 *   response.output_text.done, response.content_part.done,
 *   response.output_item.done
 *   response.completed                                (with usage; vLLM
 *                                                      sends this type for
 *                                                      "incomplete" too)
 *
 * No "data: [DONE]" follows, as in vLLM. All return malloc'd strings (NULL
 * when out of memory).
 */
#ifndef FAIRGATE_SIM_RESPONSES_RESPONSE_H
#define FAIRGATE_SIM_RESPONSES_RESPONSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* What a response object says at the moment it is written. */
struct sim_resp_object {
	const char *id;            /* "resp_..." */
	const char *msg_id;        /* the output message's "msg_..." */
	const char *model;
	const char *instructions;  /* NULL = null */
	time_t created_at;
	uint32_t max_output_tokens;
	double temperature, top_p;
	const char *status;        /* "in_progress", "completed", "incomplete" */
	const char *text;          /* output so far; NULL = no output item yet */
	size_t text_len;
	bool has_usage;
	uint64_t input_tokens, cached_tokens, output_tokens;
};

enum sim_resp_event {
	SIM_RESP_CREATED,
	SIM_RESP_IN_PROGRESS,
	SIM_RESP_ITEM_ADDED,
	SIM_RESP_PART_ADDED,
	SIM_RESP_TEXT_DELTA,
	SIM_RESP_TEXT_DONE,
	SIM_RESP_PART_DONE,
	SIM_RESP_ITEM_DONE,
	SIM_RESP_COMPLETED,
};

/* The non-streamed body. */
char *sim_responses_object(const struct sim_resp_object *r);

/* One SSE event; `delta` is the TEXT_DELTA's text. */
char *sim_responses_event(const struct sim_resp_object *r, enum sim_resp_event ev,
			  uint64_t sequence_number, const char *delta, size_t delta_len);

#endif
