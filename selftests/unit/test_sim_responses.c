/* test_sim_responses.c — fairgate-sim's /v1/responses: the conversation
 * vLLM builds from instructions and input items (and its token count), the
 * output cap and its errors, salts and priority, and the response object
 * and event shapes. */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "sim/openai_request.h"
#include "sim/responses_response.h"

static const struct sim_request_limits fcfs = {
	.model = "m", .max_model_len = 1000, .default_max_tokens = 256,
	.media_tokens = { [SIM_MM_IMAGE] = 10 },
};

static int parse(const char *body, const struct sim_request_limits *lim, struct sim_request *r,
		 struct sim_error *err)
{
	return sim_request_parse(SIM_API_RESPONSES, body, strlen(body), lim, r, err);
}

static uint32_t count(const char *body)
{
	struct sim_request r;
	struct sim_error err;

	if (parse(body, &fcfs, &r, &err)) {
		print_error("%s -> %s\n", body, err.message);
		return UINT32_MAX;
	}
	uint32_t n = r.prompts[0].n;
	sim_request_free(&r);
	return n;
}

static void refused(const char *body, int status, const char *param, const char *needle)
{
	struct sim_request r;
	struct sim_error err;

	if (parse(body, &fcfs, &r, &err) == 0) {
		sim_request_free(&r);
		print_error("accepted: %s\n", body);
		fail();
	}
	if (err.status != status || !strstr(err.message, needle) ||
	    strcmp(err.param, param ? param : "") != 0) {
		print_error("%s -> %d param=%s '%s'\n", body, err.status, err.param, err.message);
		fail();
	}
	assert_null(r.prompts);
	assert_null(r.instructions);
}

static void input_forms_render_as_chat(void **state)
{
	(void)state;
	/* a string is one user message: 3 + (4 + ceil(11/4)) */
	assert_int_equal(count("{\"input\":\"hello there\"}"), 3 + 4 + 3);
	/* instructions add a system message first: + 4 + ceil(8/4) */
	assert_int_equal(count("{\"input\":\"hello there\",\"instructions\":\"be brief\"}"),
			 3 + 4 + 3 + 4 + 2);
	/* empty instructions add nothing (vLLM skips them) */
	assert_int_equal(count("{\"input\":\"hello there\",\"instructions\":\"\"}"), 10);
	/* the same conversation as items, with parts, equals the chat request's */
	const char *items = "{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_text\","
			    "\"text\":\"ab\"},{\"type\":\"input_image\",\"image_url\":\"https://x/"
			    "a.png\"}]},{\"type\":\"message\",\"role\":\"assistant\",\"content\":"
			    "[{\"type\":\"output_text\",\"text\":\"cdef\"}]}]}";
	const char *chat = "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\","
			   "\"text\":\"ab\"},{\"type\":\"image_url\",\"image_url\":{\"url\":"
			   "\"https://x/a.png\"}}]},{\"role\":\"assistant\",\"content\":\"cdef\"}]}";
	struct sim_request a, b;
	struct sim_error err;
	assert_int_equal(parse(items, &fcfs, &a, &err), 0);
	assert_int_equal(sim_request_parse(SIM_API_CHAT, chat, strlen(chat), &fcfs, &b, &err), 0);
	assert_int_equal(a.prompts[0].n, 3 + (4 + 10 + 1) + (4 + 1));
	assert_int_equal(a.prompts[0].n, b.prompts[0].n);
	assert_memory_equal(a.prompts[0].ids, b.prompts[0].ids, a.prompts[0].n * 4);
	assert_int_equal(a.media_tokens[SIM_MM_IMAGE], 10);
	assert_int_equal(a.n, 1);
	sim_request_free(&a);
	sim_request_free(&b);
	/* tool round trip: function_call's arguments, function_call_output's output */
	assert_int_equal(count("{\"input\":[{\"role\":\"user\",\"content\":\"x\"},"
			       "{\"type\":\"function_call\",\"call_id\":\"c1\",\"name\":\"f\","
			       "\"arguments\":\"{\\\"a\\\":1}\"},{\"type\":\"function_call_output\","
			       "\"call_id\":\"c1\",\"output\":\"42\"}]}"),
			 3 + (4 + 1) + (4 + 2) + (4 + 1));
	/* a last message in progress is continued: no <|end|>, no generation prompt */
	assert_int_equal(count("{\"input\":[{\"role\":\"user\",\"content\":\"x\"},{\"type\":"
			       "\"message\",\"role\":\"assistant\",\"status\":\"in_progress\","
			       "\"content\":[{\"type\":\"output_text\",\"text\":\"The an\"}]}]}"),
			 (4 + 1) + (3 + 2));
	/* an empty list is just the generation prompt */
	assert_int_equal(count("{\"input\":[]}"), 3);
}

static void output_cap_and_fields(void **state)
{
	(void)state;
	struct sim_request r;
	struct sim_error err;
	struct sim_request_limits prio = fcfs;

	prio.priority_scheduling = true;
	assert_int_equal(parse("{\"input\":\"x\",\"max_output_tokens\":40,\"stream\":true,"
			       "\"cache_salt\":\"tenant-a\",\"priority\":-2,\"temperature\":0.2,"
			       "\"top_p\":0.9,\"n\":7,\"stream_options\":{\"include_usage\":true},"
			       "\"store\":true,\"metadata\":{\"k\":\"v\"}}", &prio, &r, &err), 0);
	assert_int_equal(r.max_tokens, 40);
	assert_int_equal(r.n, 1); /* no n in ResponsesRequest */
	assert_true(r.stream);
	assert_false(r.include_usage); /* nor stream_options */
	assert_string_equal(r.cache_salt, "tenant-a");
	assert_int_equal(r.priority, -2);
	assert_true(r.temperature == 0.2 && r.top_p == 0.9);
	sim_request_free(&r);

	/* no cap: the sim's default, within the room left */
	assert_int_equal(parse("{\"input\":\"x\"}", &fcfs, &r, &err), 0);
	assert_int_equal(r.max_tokens, 256);
	sim_request_free(&r);
	static char body[5000];
	int off = snprintf(body, sizeof(body), "{\"input\":\"");
	memset(body + off, 'a', 3900);
	strcpy(body + off + 3900, "\"}"); /* 3 + 4 + 975 = 982 tokens: 18 left */
	assert_int_equal(parse(body, &fcfs, &r, &err), 0);
	assert_int_equal(r.max_tokens, 18);
	sim_request_free(&r);

	refused("{}", 400, "input", "field required");
	refused("{\"input\":7}", 400, "input", "string or an array");
	refused("{\"input\":[{\"content\":\"x\"}]}", 400, "input", "role");
	refused("{\"input\":[{\"type\":\"reasoning\",\"summary\":[]}]}", 400, "input",
		"'reasoning' is not supported");
	refused("{\"input\":[{\"type\":\"function_call\",\"name\":\"f\"}]}", 400, "input",
		"arguments must be a string");
	refused("{\"input\":\"x\",\"instructions\":3}", 400, "instructions", "string");
	refused("{\"input\":\"x\",\"max_output_tokens\":0}", 400, "max_output_tokens",
		"at least 1");
	refused("{\"input\":\"x\",\"max_output_tokens\":995}", 400, "max_output_tokens",
		"you requested 995 output tokens and your prompt contains at least 8 input tokens");
	refused("{\"input\":\"x\",\"priority\":1}", 400, "priority", "not enabled");
	refused("{\"input\":\"x\",\"cache_salt\":\"a/b\"}", 400, "cache_salt", "cache_salt");
	refused("{\"model\":\"other\",\"input\":\"x\"}", 404, "model", "does not exist");
	refused("{\"input\":\"x\",\"temperature\":\"hot\"}", 400, "temperature", "number");
	refused("{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_audio\","
		"\"input_audio\":{\"data\":\"AA\",\"format\":\"wav\"}}]}]}", 400, "audio",
		"At most 0 audio(s)");
	off = snprintf(body, sizeof(body), "{\"instructions\":\"i\",\"input\":\"");
	memset(body + off, 'a', 4000);
	strcpy(body + off + 4000, "\"}");
	refused(body, 400, "input", "exceeds the max_model_len 1000");
}

static json_t *event_json(const char *sse, const char *type)
{
	char want[96];

	snprintf(want, sizeof(want), "event: %s\ndata: ", type);
	assert_true(strncmp(sse, want, strlen(want)) == 0);
	assert_non_null(strstr(sse, "\n\n"));
	return json_loads(sse + strlen(want), JSON_DISABLE_EOF_CHECK, NULL);
}

static void object_and_event_shapes(void **state)
{
	(void)state;
	struct sim_resp_object r = {
		.id = "resp_1", .msg_id = "msg_1", .model = "m", .created_at = 5,
		.max_output_tokens = 3, .temperature = 1, .top_p = 1, .status = "incomplete",
		.text = " lor ips dol", .text_len = 12, .has_usage = true, .input_tokens = 20,
		.cached_tokens = 16, .output_tokens = 3,
	};
	char *body = sim_responses_object(&r);
	json_t *o = json_loads(body, 0, NULL);
	assert_string_equal(json_string_value(json_object_get(o, "object")), "response");
	assert_string_equal(json_string_value(json_object_get(o, "status")), "incomplete");
	assert_string_equal(json_string_value(json_object_get(json_object_get(o,
			    "incomplete_details"), "reason")), "max_output_tokens");
	json_t *item = json_array_get(json_object_get(o, "output"), 0);
	assert_string_equal(json_string_value(json_object_get(item, "type")), "message");
	json_t *part = json_array_get(json_object_get(item, "content"), 0);
	assert_string_equal(json_string_value(json_object_get(part, "type")), "output_text");
	assert_string_equal(json_string_value(json_object_get(part, "text")), " lor ips dol");
	json_t *u = json_object_get(o, "usage");
	assert_int_equal(json_integer_value(json_object_get(u, "input_tokens")), 20);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(u,
			 "input_tokens_details"), "cached_tokens")), 16);
	assert_int_equal(json_integer_value(json_object_get(u, "output_tokens")), 3);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(u,
			 "output_tokens_details"), "reasoning_tokens")), 0);
	assert_int_equal(json_integer_value(json_object_get(u, "total_tokens")), 23);
	assert_int_equal(json_integer_value(json_object_get(o, "max_output_tokens")), 3);
	json_decref(o);
	free(body);

	r.status = "completed";
	body = sim_responses_object(&r);
	o = json_loads(body, 0, NULL);
	assert_true(json_is_null(json_object_get(o, "incomplete_details")));
	json_decref(o);
	free(body);

	/* in progress: no output, no usage */
	r.status = "in_progress";
	r.has_usage = false;
	char *ev = sim_responses_event(&r, SIM_RESP_CREATED, 0, NULL, 0);
	o = event_json(ev, "response.created");
	assert_int_equal(json_integer_value(json_object_get(o, "sequence_number")), 0);
	assert_string_equal(json_string_value(json_object_get(o, "type")), "response.created");
	json_t *resp = json_object_get(o, "response");
	assert_int_equal(json_array_size(json_object_get(resp, "output")), 0);
	assert_true(json_is_null(json_object_get(resp, "usage")));
	json_decref(o);
	free(ev);

	ev = sim_responses_event(&r, SIM_RESP_TEXT_DELTA, 4, " lor", 4);
	o = event_json(ev, "response.output_text.delta");
	assert_string_equal(json_string_value(json_object_get(o, "delta")), " lor");
	assert_string_equal(json_string_value(json_object_get(o, "item_id")), "msg_1");
	assert_int_equal(json_integer_value(json_object_get(o, "sequence_number")), 4);
	json_decref(o);
	free(ev);

	ev = sim_responses_event(&r, SIM_RESP_TEXT_DONE, 7, NULL, 0);
	o = event_json(ev, "response.output_text.done");
	assert_string_equal(json_string_value(json_object_get(o, "text")), " lor ips dol");
	json_decref(o);
	free(ev);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(input_forms_render_as_chat),
		cmocka_unit_test(output_cap_and_fields),
		cmocka_unit_test(object_and_event_shapes),
	};
	return cmocka_run_group_tests_name("sim_responses", tests, NULL, NULL);
}
