/* test_sim_request.c — fairgate-sim's request parsing: the tokenisation
 * rule a gateway calibrates against, every validation error vLLM (and
 * fairgate) applies, and the OpenAI error shape. */
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
#include "sim/openai_response.h"
#include "sim/tokenizer.h"

static const struct sim_request_limits fcfs = {
	.model = "m", .max_model_len = 1000, .priority_scheduling = false,
	.default_max_tokens = 256,
};
static const struct sim_request_limits prio = {
	.model = "m", .max_model_len = 1000, .priority_scheduling = true,
	.default_max_tokens = 256,
};

static int parse(enum sim_api api, const char *body, const struct sim_request_limits *lim,
		 struct sim_request *r, struct sim_error *err)
{
	return sim_request_parse(api, body, strlen(body), lim, r, err);
}

/* The body must be refused with `status` and a message containing `needle`. */
static void refused(enum sim_api api, const char *body, const struct sim_request_limits *lim,
		    int status, const char *param, const char *needle)
{
	struct sim_request r;
	struct sim_error err;

	if (parse(api, body, lim, &r, &err) == 0) {
		sim_request_free(&r);
		print_error("accepted: %s\n", body);
		fail();
	}
	if (err.status != status || !strstr(err.message, needle) ||
	    strcmp(err.param, param ? param : "") != 0) {
		print_error("%s -> %d param=%s '%s'\n", body, err.status, err.param, err.message);
		fail();
	}
}

static void chat_token_rule(void **state)
{
	(void)state;
	struct sim_request r;
	struct sim_error err;

	/* 3 + (4 + ceil(5/4)) + (4 + ceil(9/4)) = 3 + 6 + 7 */
	assert_int_equal(parse(SIM_API_CHAT,
			       "{\"messages\":[{\"role\":\"system\",\"content\":\"hello\"},"
			       "{\"role\":\"user\",\"content\":\"123456789\"}],\"max_tokens\":7}",
			       &fcfs, &r, &err), 0);
	assert_int_equal(r.n_prompts, 1);
	assert_int_equal(r.prompts[0].n, 16);
	assert_int_equal(r.max_tokens, 7);
	assert_int_equal(r.n, 1);
	assert_false(r.stream);
	sim_request_free(&r);

	/* parts join with "\n": "ab" + "\n" + "cdef" = 7 bytes = 2 tokens; null content = 0 */
	assert_int_equal(parse(SIM_API_CHAT,
			       "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\","
			       "\"text\":\"ab\"},{\"type\":\"text\",\"text\":\"cdef\"}]},"
			       "{\"role\":\"assistant\",\"content\":null}]}",
			       &fcfs, &r, &err), 0);
	assert_int_equal(r.prompts[0].n, 3 + 4 + 2 + 4);
	assert_int_equal(r.max_tokens, 256); /* the sim's default for chat */
	sim_request_free(&r);
}

static void same_text_same_ids_and_parts_equal_joined_string(void **state)
{
	(void)state;
	struct sim_request a, b;
	struct sim_error err;

	assert_int_equal(parse(SIM_API_CHAT,
			       "{\"messages\":[{\"role\":\"user\",\"content\":\"ab\\ncdef\"}]}",
			       &fcfs, &a, &err), 0);
	assert_int_equal(parse(SIM_API_CHAT,
			       "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\","
			       "\"text\":\"ab\"},{\"type\":\"text\",\"text\":\"cdef\"}]}]}",
			       &fcfs, &b, &err), 0);
	assert_int_equal(a.prompts[0].n, b.prompts[0].n);
	assert_memory_equal(a.prompts[0].ids, b.prompts[0].ids, a.prompts[0].n * 4);
	sim_request_free(&a);
	sim_request_free(&b);
}

static void completion_prompt_forms(void **state)
{
	(void)state;
	struct sim_request r;
	struct sim_error err;

	assert_int_equal(parse(SIM_API_COMPLETIONS, "{\"prompt\":\"abcdefgh\"}", &fcfs, &r, &err),
			 0);
	assert_int_equal(r.prompts[0].n, 2);
	assert_int_equal(r.max_tokens, 16); /* OpenAI's legacy default */
	sim_request_free(&r);

	assert_int_equal(parse(SIM_API_COMPLETIONS,
			       "{\"prompt\":[\"a\",\"abcde\"],\"n\":3,\"max_tokens\":4}", &fcfs, &r,
			       &err), 0);
	assert_int_equal(r.n_prompts, 2);
	assert_int_equal(r.prompts[0].n, 1);
	assert_int_equal(r.prompts[1].n, 2);
	assert_int_equal(r.n, 3);
	sim_request_free(&r);

	assert_int_equal(parse(SIM_API_COMPLETIONS, "{\"prompt\":[5,6,7]}", &fcfs, &r, &err), 0);
	assert_int_equal(r.n_prompts, 1);
	assert_int_equal(r.prompts[0].n, 3);
	assert_int_equal(r.prompts[0].ids[2], 7);
	sim_request_free(&r);

	assert_int_equal(parse(SIM_API_COMPLETIONS, "{\"prompt\":[[1,2],[3]]}", &fcfs, &r, &err),
			 0);
	assert_int_equal(r.n_prompts, 2);
	assert_int_equal(r.prompts[1].ids[0], 3);
	sim_request_free(&r);
}

static void fields_are_read(void **state)
{
	(void)state;
	struct sim_request r;
	struct sim_error err;

	assert_int_equal(parse(SIM_API_CHAT,
			       "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
			       "\"max_tokens\":9,\"max_completion_tokens\":5,\"stream\":true,"
			       "\"stream_options\":{\"include_usage\":true},\"cache_salt\":\"t-1\","
			       "\"priority\":-3,\"temperature\":0.7,\"unknown\":{}}",
			       &prio, &r, &err), 0);
	assert_int_equal(r.max_tokens, 5); /* max_completion_tokens wins */
	assert_true(r.stream);
	assert_true(r.include_usage);
	assert_true(r.has_salt);
	assert_string_equal(r.cache_salt, "t-1");
	assert_int_equal(r.priority, -3);
	sim_request_free(&r);

	/* priority 0 is fine under fcfs; max_tokens as an integral real too */
	assert_int_equal(parse(SIM_API_CHAT,
			       "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
			       "\"priority\":0,\"max_tokens\":12.0}", &fcfs, &r, &err), 0);
	assert_int_equal(r.max_tokens, 12);
	sim_request_free(&r);

	/* exactly max_model_len is allowed */
	assert_int_equal(parse(SIM_API_COMPLETIONS, "{\"prompt\":[1,2,3],\"max_tokens\":997}",
			       &fcfs, &r, &err), 0);
	sim_request_free(&r);
}

static void validation_errors(void **state)
{
	(void)state;
	const enum sim_api C = SIM_API_CHAT, P = SIM_API_COMPLETIONS;
	const char *msg = "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]";
	static char body[8192];

	refused(C, "{\"messages\":", &fcfs, 400, NULL, "JSON decode error");
	refused(C, "{} trailing", &fcfs, 400, NULL, "JSON decode error");
	{
		/* a raw NUL is JSON nowhere; jansson alone takes one after a number */
		static const char nul_body[] = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
					       "\"max_tokens\":5\0}";
		struct sim_request r;
		struct sim_error e;

		assert_int_equal(sim_request_parse(C, nul_body, sizeof(nul_body) - 1, &fcfs, &r, &e), -1);
		assert_int_equal(e.status, 400);
		assert_non_null(strstr(e.message, "invalid control character at byte 58"));
	}
	refused(C, "[1,2]", &fcfs, 400, NULL, "must be a JSON object");
	refused(C, "{}", &fcfs, 400, "messages", "field required");
	refused(C, "{\"messages\":[]}", &fcfs, 400, "messages", "non-empty");
	refused(C, "{\"messages\":[{\"content\":\"x\"}]}", &fcfs, 400, "messages", "role");
	refused(C, "{\"messages\":[{\"role\":\"user\",\"content\":5}]}", &fcfs, 400, "messages",
		"content");
	refused(C, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\","
		"\"image_url\":{\"url\":\"data:image/png;base64,AAAA\"}}]}]}",
		&fcfs, 400, NULL, "m is not a multimodal model");
	refused(C, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}",
		&fcfs, 400, "messages", "must carry a url");
	refused(C, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"file\","
		"\"file\":{}}]}]}", &fcfs, 400, "messages", "'file' is not supported");
	refused(P, "{}", &fcfs, 400, "prompt", "field required");
	refused(P, "{\"prompt\":\"\"}", &fcfs, 400, "prompt", "empty");
	refused(P, "{\"prompt\":[\"a\",7]}", &fcfs, 400, "prompt", "prompt[1]");
	refused(P, "{\"prompt\":[-1]}", &fcfs, 400, "prompt", "prompt[0]");
	refused(P, "{\"prompt\":{}}", &fcfs, 400, "prompt", "must be a string");

	snprintf(body, sizeof(body), "{\"model\":\"other\",%s}", msg);
	refused(C, body, &fcfs, 404, "model", "does not exist");
	snprintf(body, sizeof(body), "{%s,\"max_tokens\":0}", msg);
	refused(C, body, &fcfs, 400, "max_tokens", "at least 1");
	snprintf(body, sizeof(body), "{%s,\"max_tokens\":\"5\"}", msg);
	refused(C, body, &fcfs, 400, "max_tokens", "integer");
	snprintf(body, sizeof(body), "{%s,\"max_tokens\":2.5}", msg);
	refused(C, body, &fcfs, 400, "max_tokens", "integer");
	snprintf(body, sizeof(body), "{%s,\"n\":0}", msg);
	refused(C, body, &fcfs, 400, "n", "at least 1");
	snprintf(body, sizeof(body), "{%s,\"n\":1025}", msg);
	refused(C, body, &fcfs, 400, "n", "");
	snprintf(body, sizeof(body), "{%s,\"stream\":\"yes\"}", msg);
	refused(C, body, &fcfs, 400, "stream", "boolean");
	snprintf(body, sizeof(body), "{%s,\"stream_options\":{\"include_usage\":true}}", msg);
	refused(C, body, &fcfs, 400, "stream_options", "stream=True");

	/* cache_salt: 1..128 chars, none of @ / \ NUL */
	const char *bad_salts[] = { "\"\"", "\"a@b\"", "\"a/b\"", "\"a\\\\b\"", "\"a\\u0000b\"",
				    "7", "null_placeholder" };
	for (size_t i = 0; i < sizeof(bad_salts) / sizeof(*bad_salts); i++) {
		if (!strcmp(bad_salts[i], "null_placeholder")) {
			char longsalt[140];
			memset(longsalt, 's', 129);
			longsalt[129] = '\0';
			snprintf(body, sizeof(body), "{%s,\"cache_salt\":\"%s\"}", msg, longsalt);
		} else {
			snprintf(body, sizeof(body), "{%s,\"cache_salt\":%s}", msg, bad_salts[i]);
		}
		refused(C, body, &fcfs, 400, "cache_salt", "cache_salt");
	}
	char okbody[512], salt128[129];
	memset(salt128, 'k', 128);
	salt128[128] = '\0';
	snprintf(okbody, sizeof(okbody), "{%s,\"cache_salt\":\"%s\"}", msg, salt128);
	struct sim_request r;
	struct sim_error err;
	assert_int_equal(parse(C, okbody, &fcfs, &r, &err), 0);
	sim_request_free(&r);

	snprintf(body, sizeof(body), "{%s,\"priority\":1}", msg);
	refused(C, body, &fcfs, 400, "priority", "Priority scheduling is not enabled");
	snprintf(body, sizeof(body), "{%s,\"priority\":\"high\"}", msg);
	refused(C, body, &prio, 400, "priority", "integer");

	/* prompt + max_tokens over max_model_len (1000) */
	refused(P, "{\"prompt\":[1,2,3],\"max_tokens\":998}", &fcfs, 400, "max_tokens",
		"maximum context length is 1000 tokens. However, you requested 1001 tokens "
		"(3 in the prompt, 998 in the completion)");
	memset(body, 'a', 4004);
	memcpy(body, "{\"prompt\":\"", 11);
	strcpy(body + 4004, "\"}"); /* 3993 bytes = 999 tokens > 1000 - 16 */
	refused(P, body, &fcfs, 400, "max_tokens", "maximum context length");
	memset(body, 'a', 4100);
	memcpy(body, "{\"prompt\":\"", 11);
	strcpy(body + 4100, "\"}"); /* the prompt alone is too long */
	refused(P, body, &fcfs, 400, "prompt", "in the prompt");
	refused(P, "{\"prompt\":[\"a\",\"b\"],\"n\":600}", &fcfs, 400, "n", "at most");
}

static const struct sim_request_limits vision = {
	.model = "m", .max_model_len = 1000, .default_max_tokens = 256,
	.media_tokens = { [SIM_MM_IMAGE] = 100, [SIM_MM_AUDIO] = 0, [SIM_MM_VIDEO] = 0 },
};

/* Media parts cost the served model's fixed count, whatever the bytes of
 * their data URL; a modality the model lacks is refused as vLLM does. */
static void media_parts_are_fixed_counts(void **state)
{
	(void)state;
	struct sim_request r, same, other;
	struct sim_error err;
	static char big[200000];

	/* a 150 KB data URL is still 100 tokens: 3 + 4 + 100 + ceil(4/4) */
	int off = snprintf(big, sizeof(big), "{\"messages\":[{\"role\":\"user\",\"content\":["
			   "{\"type\":\"text\",\"text\":\"what\"},{\"type\":\"image_url\","
			   "\"image_url\":{\"url\":\"data:image/png;base64,");
	memset(big + off, 'Q', 150000);
	snprintf(big + off + 150000, sizeof(big) - off - 150000, "\"}}]}]}");
	assert_int_equal(parse(SIM_API_CHAT, big, &vision, &r, &err), 0);
	assert_int_equal(r.prompts[0].n, 3 + 4 + 100 + 1);
	assert_int_equal(r.media_tokens[SIM_MM_IMAGE], 100);

	/* the same image gives the same placeholder ids (prefix-cache hits),
	 * another image other ids; input_image (responses' name) counts alike */
	assert_int_equal(parse(SIM_API_CHAT, big, &vision, &same, &err), 0);
	assert_memory_equal(r.prompts[0].ids, same.prompts[0].ids, r.prompts[0].n * 4);
	assert_int_equal(parse(SIM_API_CHAT,
			       "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\","
			       "\"text\":\"what\"},{\"type\":\"input_image\",\"image_url\":"
			       "\"https://x/cat.png\"}]}]}", &vision, &other, &err), 0);
	assert_int_equal(other.prompts[0].n, r.prompts[0].n);
	assert_true(memcmp(r.prompts[0].ids + 3, other.prompts[0].ids + 3, 100 * 4) != 0);
	for (uint32_t i = 3; i < 103; i++)
		assert_true(sim_token_is_special(other.prompts[0].ids[i]));
	sim_request_free(&r);
	sim_request_free(&same);
	sim_request_free(&other);

	refused(SIM_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
		"\"input_audio\",\"input_audio\":{\"data\":\"AAAA\",\"format\":\"wav\"}}]}]}",
		&vision, 400, "audio", "At most 0 audio(s) may be provided in one prompt.");
	refused(SIM_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
		"\"video_url\",\"video_url\":{\"url\":\"https://x/v.mp4\"}}]}]}",
		&vision, 400, "video", "At most 0 video(s)");
	/* prompt + media over the context is the usual length error */
	refused(SIM_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
		"\"image_url\",\"image_url\":\"a\"},{\"type\":\"image_url\",\"image_url\":\"b\"}]}],"
		"\"max_tokens\":800}", &vision, 400, "max_tokens", "maximum context length");
}

/* The chat template's switches move the count by exactly their tokens. */
static void chat_template_switches(void **state)
{
	(void)state;
	struct sim_request r;
	struct sim_error err;
	const char *m = "\"messages\":[{\"role\":\"user\",\"content\":\"12345678\"}]";
	char body[256];

	snprintf(body, sizeof(body), "{%s}", m);
	assert_int_equal(parse(SIM_API_CHAT, body, &fcfs, &r, &err), 0);
	assert_int_equal(r.prompts[0].n, 3 + 4 + 2);
	sim_request_free(&r);
	snprintf(body, sizeof(body), "{%s,\"add_generation_prompt\":false}", m);
	assert_int_equal(parse(SIM_API_CHAT, body, &fcfs, &r, &err), 0);
	assert_int_equal(r.prompts[0].n, 4 + 2);
	sim_request_free(&r);
	snprintf(body, sizeof(body), "{%s,\"add_generation_prompt\":false,"
		 "\"continue_final_message\":true}", m);
	assert_int_equal(parse(SIM_API_CHAT, body, &fcfs, &r, &err), 0);
	assert_int_equal(r.prompts[0].n, 3 + 2); /* no <|end|>: the model continues */
	sim_request_free(&r);
	snprintf(body, sizeof(body), "{%s,\"continue_final_message\":true}", m);
	refused(SIM_API_CHAT, body, &fcfs, 400, NULL, "Cannot set both");
}

/* n, best_of, beam search, min_tokens, ignore_eos, truncate_prompt_tokens. */
static void sampling_fields(void **state)
{
	(void)state;
	struct sim_request r;
	struct sim_error err;
	struct sim_request_limits v1 = fcfs;
	const char *m = "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]";
	char body[512];

	v1.refuse_best_of = true;
	/* vLLM >= 0.12: best_of is no field of the protocol, so it is ignored */
	snprintf(body, sizeof(body), "{%s,\"n\":2,\"best_of\":5}", m);
	assert_int_equal(parse(SIM_API_CHAT, body, &fcfs, &r, &err), 0);
	assert_int_equal(r.n, 2);
	sim_request_free(&r);
	/* vLLM 0.8-0.11 (V1): only 1 passes */
	refused(SIM_API_CHAT, body, &v1, 400, "best_of", "vLLM V1 does not yet support best_of.");
	snprintf(body, sizeof(body), "{%s,\"n\":3,\"best_of\":2}", m);
	refused(SIM_API_CHAT, body, &v1, 400, "best_of", "greater than or equal to n");
	refused(SIM_API_COMPLETIONS, "{\"prompt\":\"x\",\"best_of\":0}", &v1, 400, "best_of",
		"at least 1");
	snprintf(body, sizeof(body), "{%s,\"best_of\":1}", m);
	assert_int_equal(parse(SIM_API_CHAT, body, &v1, &r, &err), 0);
	sim_request_free(&r);

	snprintf(body, sizeof(body), "{%s,\"use_beam_search\":true}", m);
	refused(SIM_API_CHAT, body, &fcfs, 400, "use_beam_search", "not simulated");

	snprintf(body, sizeof(body), "{%s,\"max_tokens\":5,\"min_tokens\":3,\"ignore_eos\":true}", m);
	assert_int_equal(parse(SIM_API_CHAT, body, &fcfs, &r, &err), 0);
	assert_int_equal(r.min_tokens, 3);
	assert_true(r.ignore_eos);
	sim_request_free(&r);
	snprintf(body, sizeof(body), "{%s,\"max_tokens\":5,\"min_tokens\":6}", m);
	refused(SIM_API_CHAT, body, &fcfs, 400, "min_tokens",
		"min_tokens must be less than or equal to max_tokens=5, got 6.");

	/* truncation keeps the last k tokens (or the first, truncation_side right) */
	assert_int_equal(parse(SIM_API_COMPLETIONS,
			       "{\"prompt\":[1,2,3,4,5],\"truncate_prompt_tokens\":2}", &fcfs, &r,
			       &err), 0);
	assert_int_equal(r.prompts[0].n, 2);
	assert_int_equal(r.prompts[0].ids[0], 4);
	sim_request_free(&r);
	assert_int_equal(parse(SIM_API_COMPLETIONS,
			       "{\"prompt\":[1,2,3,4,5],\"truncate_prompt_tokens\":2,"
			       "\"truncation_side\":\"right\"}", &fcfs, &r, &err), 0);
	assert_int_equal(r.prompts[0].ids[1], 2);
	sim_request_free(&r);
	refused(SIM_API_COMPLETIONS, "{\"prompt\":\"x\",\"truncate_prompt_tokens\":1001}", &fcfs,
		400, "truncate_prompt_tokens", "greater than max_model_len (1000)");
}

/* continuous_usage_stats rides on include_usage, as in vLLM. */
static void continuous_usage_needs_include_usage(void **state)
{
	(void)state;
	struct sim_request r;
	struct sim_error err;
	struct sim_request_limits forced = fcfs;
	const char *m = "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":true";
	char body[512];

	snprintf(body, sizeof(body), "{%s,\"stream_options\":{\"include_usage\":true,"
		 "\"continuous_usage_stats\":true}}", m);
	assert_int_equal(parse(SIM_API_CHAT, body, &fcfs, &r, &err), 0);
	assert_true(r.include_usage && r.continuous_usage);
	sim_request_free(&r);
	snprintf(body, sizeof(body), "{%s,\"stream_options\":{\"continuous_usage_stats\":true}}", m);
	assert_int_equal(parse(SIM_API_CHAT, body, &fcfs, &r, &err), 0);
	assert_false(r.include_usage || r.continuous_usage);
	sim_request_free(&r);
	snprintf(body, sizeof(body), "{%s,\"stream_options\":{\"continuous_usage_stats\":\"y\"}}",
		 m);
	refused(SIM_API_CHAT, body, &fcfs, 400, "continuous_usage_stats", "boolean");
	/* --enable-force-include-usage: both, for every stream */
	forced.force_include_usage = true;
	assert_int_equal(parse(SIM_API_COMPLETIONS,
			       "{\"prompt\":\"x\",\"stream\":true}", &forced, &r, &err), 0);
	assert_true(r.include_usage && r.continuous_usage);
	sim_request_free(&r);
	assert_int_equal(parse(SIM_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
			       &forced, &r, &err), 0);
	assert_false(r.include_usage); /* not a stream */
	sim_request_free(&r);
}

static void error_json_shape(void **state)
{
	(void)state;
	struct sim_error err;

	sim_error_set(&err, 400, "cache_salt", "bad \"salt\" %d", 7);
	char *s = sim_error_json(&err);
	json_error_t je;
	json_t *j = json_loads(s, 0, &je);
	assert_non_null(j);
	json_t *e = json_object_get(j, "error");
	assert_string_equal(json_string_value(json_object_get(e, "message")), "bad \"salt\" 7");
	assert_string_equal(json_string_value(json_object_get(e, "type")), "BadRequestError");
	assert_string_equal(json_string_value(json_object_get(e, "param")), "cache_salt");
	assert_int_equal(json_integer_value(json_object_get(e, "code")), 400);
	json_decref(j);
	free(s);

	sim_error_set(&err, 404, NULL, "x");
	s = sim_error_json(&err);
	j = json_loads(s, 0, &je);
	assert_true(json_is_null(json_object_get(json_object_get(j, "error"), "param")));
	json_decref(j);
	free(s);
}

static void stream_and_full_usage_agree(void **state)
{
	(void)state;
	struct sim_resp_meta m = { .api = SIM_API_CHAT, .id = "x", .created = 1, .model = "m" };
	struct sim_usage u = { .prompt_tokens = 10, .completion_tokens = 3, .cached_tokens = 8,
			       .details = true };
	struct sim_resp_choice c = { .text = " lor ips dol", .len = 12, .finish_reason = "length" };
	char *full = sim_resp_full(&m, &c, 1, &u);
	char *chunk = sim_resp_usage_chunk(&m, &u);
	json_error_t je;
	json_t *a = json_loads(full, 0, &je);
	assert_true(strncmp(chunk, "data: ", 6) == 0);
	json_t *b = json_loads(chunk + 6, 0, &je);

	assert_non_null(a);
	assert_non_null(b);
	assert_true(json_equal(json_object_get(a, "usage"), json_object_get(b, "usage")));
	assert_int_equal(json_integer_value(json_object_get(json_object_get(json_object_get(
				 a, "usage"), "prompt_tokens_details"), "cached_tokens")), 8);
	assert_int_equal(json_array_size(json_object_get(b, "choices")), 0);
	json_decref(a);
	json_decref(b);
	free(full);
	free(chunk);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(chat_token_rule),
		cmocka_unit_test(same_text_same_ids_and_parts_equal_joined_string),
		cmocka_unit_test(completion_prompt_forms),
		cmocka_unit_test(fields_are_read),
		cmocka_unit_test(validation_errors),
		cmocka_unit_test(media_parts_are_fixed_counts),
		cmocka_unit_test(chat_template_switches),
		cmocka_unit_test(sampling_fields),
		cmocka_unit_test(continuous_usage_needs_include_usage),
		cmocka_unit_test(error_json_shape),
		cmocka_unit_test(stream_and_full_usage_agree),
	};
	return cmocka_run_group_tests_name("sim_request", tests, NULL, NULL);
}
