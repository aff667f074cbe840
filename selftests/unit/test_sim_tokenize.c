/* test_sim_tokenize.c — fairgate-sim's /tokenize and /detokenize: the count
 * of a chat body equals the prompt_tokens the same body gets as a request
 * (the promise a gateway relies on to ask before it admits), the completion
 * form, token strings, and detokenize inverting tokenize and the generated
 * words. */
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
#include "sim/tokenize_api.h"
#include "sim/tokenizer.h"

static const struct sim_request_limits lim = {
	.model = "m", .max_model_len = 1000, .default_max_tokens = 16,
	.media_tokens = { [SIM_MM_IMAGE] = 64, [SIM_MM_AUDIO] = 32 },
};

static json_t *tokenize(const char *body)
{
	struct sim_error err;
	char *s = sim_tokenize(body, strlen(body), &lim, &err);

	if (!s) {
		print_error("%s -> %d %s\n", body, err.status, err.message);
		return NULL;
	}
	json_t *j = json_loads(s, 0, NULL);
	free(s);
	return j;
}

static uint64_t prompt_tokens(enum sim_api api, const char *body)
{
	struct sim_request r;
	struct sim_error err;

	if (sim_request_parse(api, body, strlen(body), &lim, &r, &err)) {
		print_error("%s -> %s\n", body, err.message);
		return UINT64_MAX;
	}
	uint64_t n = r.prompts[0].n;
	sim_request_free(&r);
	return n;
}

static void chat_count_equals_request(void **state)
{
	(void)state;
	const char *bodies[] = {
		"{\"messages\":[{\"role\":\"user\",\"content\":\"hello there, simulator\"}]}",
		"{\"messages\":[{\"role\":\"system\",\"content\":\"be terse\"},{\"role\":\"user\","
		"\"content\":[{\"type\":\"text\",\"text\":\"ab\"},{\"type\":\"image_url\","
		"\"image_url\":{\"url\":\"data:image/png;base64,iVBORw0KGgo=\"}},{\"type\":\"text\","
		"\"text\":\"cdefg\"}]}],\"max_tokens\":5}",
		"{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\","
		"\"content\":\"partial ans\"}],\"add_generation_prompt\":false,"
		"\"continue_final_message\":true}",
		"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_audio\","
		"\"input_audio\":{\"data\":\"UklGRg==\",\"format\":\"wav\"}}]}],"
		"\"add_generation_prompt\":false}",
		"{\"model\":\"m\",\"messages\":[{\"role\":\"tool\",\"content\":null},"
		"{\"role\":\"user\",\"content\":\"\\u00e9t\\u00e9 \\ud83d\\ude00\"}]}",
	};
	for (size_t i = 0; i < sizeof(bodies) / sizeof(*bodies); i++) {
		json_t *j = tokenize(bodies[i]);
		assert_non_null(j);
		uint64_t want = prompt_tokens(SIM_API_CHAT, bodies[i]);
		assert_int_equal(json_integer_value(json_object_get(j, "count")), want);
		assert_int_equal(json_array_size(json_object_get(j, "tokens")), want);
		assert_int_equal(json_integer_value(json_object_get(j, "max_model_len")), 1000);
		assert_true(json_is_null(json_object_get(j, "token_strs")));
		json_decref(j);
	}
	/* the worked rule: 3 + (4 + ceil(22/4)) = 13 */
	json_t *j = tokenize(bodies[0]);
	assert_int_equal(json_integer_value(json_object_get(j, "count")), 13);
	json_decref(j);
	/* with the image: 3 + (4 + 8/4) + (4 + 64 + ceil(8/4)) = 79 */
	j = tokenize(bodies[1]);
	assert_int_equal(json_integer_value(json_object_get(j, "count")), 79);
	json_decref(j);
}

static void completion_form_and_no_length_check(void **state)
{
	(void)state;
	static char body[8192];

	json_t *j = tokenize("{\"prompt\":\"abcdefghi\",\"add_special_tokens\":true}");
	assert_int_equal(json_integer_value(json_object_get(j, "count")),
			 prompt_tokens(SIM_API_COMPLETIONS, "{\"prompt\":\"abcdefghi\"}"));
	assert_int_equal(json_integer_value(json_object_get(j, "count")), 3);
	json_decref(j);

	/* 6000 bytes = 1500 tokens, past max_model_len: still counted */
	int off = snprintf(body, sizeof(body), "{\"prompt\":\"");
	memset(body + off, 'z', 6000);
	strcpy(body + off + 6000, "\"}");
	j = tokenize(body);
	assert_int_equal(json_integer_value(json_object_get(j, "count")), 1500);
	json_decref(j);
}

static void token_strs_spell_each_token(void **state)
{
	(void)state;
	/* "h\u00e9l" is 4 bytes; an "\u00e9" split across tokens is spelt as bytes */
	json_t *j = tokenize("{\"prompt\":\"h\\u00e9labc\\u00e9\",\"return_token_strs\":true}");
	json_t *s = json_object_get(j, "token_strs");
	assert_int_equal(json_array_size(s), 3);
	assert_string_equal(json_string_value(json_array_get(s, 0)), "h\xc3\xa9l");
	assert_string_equal(json_string_value(json_array_get(s, 1)), "abc<0xC3>");
	assert_string_equal(json_string_value(json_array_get(s, 2)), "<0xA9>");
	json_decref(j);

	j = tokenize("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\","
		     "\"image_url\":\"u\"}]}],\"return_token_strs\":true}");
	s = json_object_get(j, "token_strs");
	assert_string_equal(json_string_value(json_array_get(s, 0)), "<|start|>");
	assert_string_equal(json_string_value(json_array_get(s, 1)), "user");
	assert_string_equal(json_string_value(json_array_get(s, 3)), "<|image|>");
	assert_string_equal(json_string_value(json_array_get(s, 66)), "<|image|>");
	assert_string_equal(json_string_value(json_array_get(s, 67)), "<|end|>");
	json_decref(j);
}

static char *detok(const char *body, struct sim_error *err)
{
	return sim_detokenize_body(body, strlen(body), &lim, err);
}

static void detokenize_inverts(void **state)
{
	(void)state;
	struct sim_error err;
	json_t *j = tokenize("{\"prompt\":\"caf\\u00e9 au lait, s'il vous pla\\u00eet\"}");
	json_t *req = json_pack("{s:O}", "tokens", json_object_get(j, "tokens"));
	char *body = json_dumps(req, 0);
	char *out = detok(body, &err);
	json_t *o = json_loads(out, 0, NULL);

	assert_string_equal(json_string_value(json_object_get(o, "prompt")),
			    "caf\xc3\xa9 au lait, s'il vous pla\xc3\xaet");
	json_decref(o);
	free(out);
	free(body);
	json_decref(req);
	json_decref(j);

	/* a generated word's id is its text, like any text token */
	char w[4];
	uint32_t id = sim_output_token(7);
	sim_token_bytes(id, w);
	char b2[64];
	snprintf(b2, sizeof(b2), "{\"tokens\":[%u,%u]}", id, sim_output_token(0));
	out = detok(b2, &err);
	o = json_loads(out, 0, NULL);
	assert_string_equal(json_string_value(json_object_get(o, "prompt")), " adi lor");
	assert_memory_equal(w, " adi", 4);
	json_decref(o);
	free(out);

	/* bytes that are not UTF-8 become U+FFFD; chat framing reads back */
	out = detok("{\"tokens\":[4278190080,4294967041,4294967043]}", &err);
	o = json_loads(out, 0, NULL);
	assert_non_null(o);
	assert_non_null(strstr(json_string_value(json_object_get(o, "prompt")), "<|start|><|end|>"));
	json_decref(o);
	free(out);
	out = detok("{\"tokens\":[255]}", &err);
	o = json_loads(out, 0, NULL);
	assert_string_equal(json_string_value(json_object_get(o, "prompt")), "\xef\xbf\xbd");
	json_decref(o);
	free(out);
	out = detok("{\"tokens\":[]}", &err);
	assert_string_equal(out, "{\"prompt\":\"\"}");
	free(out);
}

static void refusals(void **state)
{
	(void)state;
	struct sim_error err;
	const char *bad_tok[] = {
		"{}", "{\"prompt\":[1,2]}", "{\"model\":\"x\",\"prompt\":\"a\"}",
		"{\"messages\":[]}", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
		"\"chat_template\":\"{{x}}\"}", "not json",
		"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
		"\"continue_final_message\":true}",
	};
	const int want_tok[] = { 400, 400, 404, 400, 400, 400, 400 };
	for (size_t i = 0; i < sizeof(bad_tok) / sizeof(*bad_tok); i++) {
		char *s = sim_tokenize(bad_tok[i], strlen(bad_tok[i]), &lim, &err);
		assert_null(s);
		assert_int_equal(err.status, want_tok[i]);
	}
	const char *bad_detok[] = { "{}", "{\"tokens\":[-1]}", "{\"tokens\":[1.5]}",
				    "{\"tokens\":[4294967296]}", "{\"tokens\":\"ab\"}" };
	for (size_t i = 0; i < sizeof(bad_detok) / sizeof(*bad_detok); i++) {
		assert_null(detok(bad_detok[i], &err));
		assert_int_equal(err.status, 400);
		assert_string_equal(err.param, "tokens");
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(chat_count_equals_request),
		cmocka_unit_test(completion_form_and_no_length_check),
		cmocka_unit_test(token_strs_spell_each_token),
		cmocka_unit_test(detokenize_inverts),
		cmocka_unit_test(refusals),
	};
	return cmocka_run_group_tests_name("sim_tokenize", tests, NULL, NULL);
}
