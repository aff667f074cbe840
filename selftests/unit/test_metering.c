/* test_metering.c — what decides that no request reaches the engine
 * unpriced: the route table (deny by default, canonical paths only,
 * agent.passthrough), the shapes each API's body is measured as (chat
 * framing and content parts, responses input, prompt arrays, best_of), the
 * output cap written into the forwarded body, the /tokenize body and
 * answer, and the stream relay's continuous usage (cut out for clients
 * that did not ask, the first prompt count heard) and responses events. */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "lib/buf.h"
#include "agent/http/http_request.h"
#include "agent/http/http_sse.h"
#include "policy/request_path.h"
#include "selftests/common/request_scan_diff.h"

static int parse(enum fg_api api, const char *body, struct fg_req_info *info, char *msg,
		 const char **param)
{
	char why[1024];
	size_t len = strlen(body);

	/* every body of these tables also read in pieces, as the proxy reads it */
	if (!scan_diff(api, body, len, 4096, 8, len, why, sizeof(why)))
		fail_msg("the body read in pieces differs from one read: %s\nbody: %.200s", why, body);
	return fg_request_parse(api, body, len, info, msg, 256, param);
}

static enum fg_route_verdict route(const struct fg_agent *a, const char *method, const char *t,
				   struct fg_route *r)
{
	const char *why;

	return fg_route_target(a, fg_method_bit(method, strlen(method)), t, strlen(t), r, &why);
}

static void routes_deny_by_default(void **state)
{
	(void)state;
	struct fg_agent a = { 0 };
	struct fg_route r;
	static const struct {
		const char *method, *target;
		enum fg_route_verdict v;
		enum fg_api api;
	} cases[] = {
		{ "POST", "/v1/chat/completions", FG_ROUTE_OK, FG_API_CHAT },
		{ "POST", "/v1/chat/completions?x=1", FG_ROUTE_OK, FG_API_CHAT },
		{ "POST", "/v1/completions", FG_ROUTE_OK, FG_API_COMPLETIONS },
		{ "POST", "/v1/embeddings", FG_ROUTE_OK, FG_API_EMBEDDINGS },
		{ "POST", "/v1/responses", FG_ROUTE_OK, FG_API_RESPONSES },
		{ "POST", "/tokenize", FG_ROUTE_OK, FG_API_TOKENIZE },
		{ "POST", "/detokenize", FG_ROUTE_OK, FG_API_DETOKENIZE },
		{ "GET", "/v1/models", FG_ROUTE_OK, FG_API_NONE },
		{ "HEAD", "/health", FG_ROUTE_OK, FG_API_NONE },
		{ "GET", "/metrics", FG_ROUTE_OK, FG_API_NONE },
		{ "GET", "/version", FG_ROUTE_OK, FG_API_NONE },
		/* the method matters */
		{ "GET", "/v1/chat/completions", FG_ROUTE_METHOD, 0 },
		{ "POST", "/v1/models", FG_ROUTE_METHOD, 0 },
		{ "DELETE", "/v1/responses", FG_ROUTE_METHOD, 0 },
		/* what the engine routes differently, or not at all */
		{ "POST", "/invocations", FG_ROUTE_NOT_FOUND, 0 },
		{ "POST", "/v1/chat/completions/", FG_ROUTE_NOT_FOUND, 0 },
		{ "POST", "/v1/chat/completionsX", FG_ROUTE_NOT_FOUND, 0 },
		{ "POST", "/V1/chat/completions", FG_ROUTE_NOT_FOUND, 0 },
		{ "GET", "/v1/responses/resp_1", FG_ROUTE_NOT_FOUND, 0 },
		{ "POST", "/v1/chat%2Fcompletions", FG_ROUTE_BAD_TARGET, 0 },
		{ "POST", "/v1/%63hat/completions", FG_ROUTE_BAD_TARGET, 0 },
		{ "POST", "/v1//chat/completions", FG_ROUTE_BAD_TARGET, 0 },
		{ "POST", "/v1/./chat/completions", FG_ROUTE_BAD_TARGET, 0 },
		{ "POST", "/v1/x/../chat/completions", FG_ROUTE_BAD_TARGET, 0 },
		{ "POST", "/v1/chat/completions/..", FG_ROUTE_BAD_TARGET, 0 },
		{ "POST", "/v1/chat/completions#x", FG_ROUTE_BAD_TARGET, 0 },
		{ "POST", "/v1\\chat\\completions", FG_ROUTE_BAD_TARGET, 0 },
		{ "POST", "v1/chat/completions", FG_ROUTE_BAD_TARGET, 0 },
		{ "POST", "*", FG_ROUTE_BAD_TARGET, 0 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		enum fg_route_verdict v = route(&a, cases[i].method, cases[i].target, &r);
		if (v != cases[i].v) {
			print_error("%s %s: verdict %d, want %d\n", cases[i].method, cases[i].target, v,
				    cases[i].v);
			fail();
		}
		if (v == FG_ROUTE_OK)
			assert_int_equal(r.api, cases[i].api);
	}
	assert_int_equal(route(&a, "GET", "/v1/chat/completions", &r), FG_ROUTE_METHOD);
	assert_int_equal(r.allowed, FG_M_POST);
	assert_int_equal(route(&a, "GET", "/health", &r), FG_ROUTE_OK);
	assert_true(r.public_path);
	assert_int_equal(route(&a, "GET", "/v1/models", &r), FG_ROUTE_OK);
	assert_false(r.public_path);
	char text[64];
	fg_methods_text(FG_M_GET | FG_M_HEAD, text, sizeof(text));
	assert_string_equal(text, "GET, HEAD");
}

static void passthrough_entries_route_with_their_price(void **state)
{
	(void)state;
	struct fg_agent a = { .n_passthrough = 3 };
	struct fg_route r;

	strcpy(a.passthrough[0].path, "/v1/audio/");
	a.passthrough[0].prefix = true;
	a.passthrough[0].methods = FG_M_POST;
	a.passthrough[0].units = 50;
	a.passthrough[0].auth = 1;
	strcpy(a.passthrough[1].path, "/v1/audio/translations");
	a.passthrough[1].methods = FG_M_POST;
	a.passthrough[1].units = 80;
	a.passthrough[1].auth = 1;
	strcpy(a.passthrough[2].path, "/server_info");
	a.passthrough[2].methods = FG_M_GET;
	a.passthrough[2].auth = 0;

	assert_int_equal(route(&a, "POST", "/v1/audio/transcriptions", &r), FG_ROUTE_OK);
	assert_int_equal(r.api, FG_API_PASSTHROUGH);
	assert_true(r.pass == &a.passthrough[0]);
	assert_false(r.public_path);
	/* an exact entry beats a prefix */
	assert_int_equal(route(&a, "POST", "/v1/audio/translations", &r), FG_ROUTE_OK);
	assert_true(r.pass == &a.passthrough[1]);
	assert_int_equal(route(&a, "GET", "/v1/audio/x", &r), FG_ROUTE_METHOD);
	assert_int_equal(route(&a, "GET", "/server_info?x", &r), FG_ROUTE_OK);
	assert_true(r.public_path);
	/* a prefix never reaches past canonical paths, nor shadows a priced one */
	assert_int_equal(route(&a, "POST", "/v1/audio/../chat/completions", &r), FG_ROUTE_BAD_TARGET);
	assert_int_equal(route(&a, "POST", "/v1/audio%2F..%2Fchat", &r), FG_ROUTE_BAD_TARGET);
	assert_true(fg_route_is_builtin("/tokenize", 9));
	assert_false(fg_route_is_builtin("/server_info", 12));
}

static void chat_parts_count_by_type(void **state)
{
	(void)state;
	struct fg_req_info info;
	char msg[256];
	const char *param;
	/* a 150 KB data URL is one image, not ~37K tokens of base64 */
	size_t big = 150 * 1024;
	char *body = malloc(big + 512);
	int n = snprintf(body, big + 512,
			 "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"describe\"},"
			 "{\"image_url\":{\"url\":\"data:image/png;base64,");
	memset(body + n, 'A', big);
	snprintf(body + n + big, 512,
		 "\"},\"type\":\"image_url\"},{\"type\":\"input_audio\",\"input_audio\":{\"data\":\"UklG\",\"format\":\"wav\"}}]},"
		 "{\"role\":\"assistant\",\"content\":\"ok\",\"tool_calls\":[{\"function\":{\"arguments\":\"{}\"}}]}]}");
	assert_int_equal(parse(FG_API_CHAT, body, &info, msg, &param), 0);
	assert_int_equal(info.shape.prompt_chars, 8 + 2 + 2);
	assert_int_equal(info.shape.images, 1);
	assert_int_equal(info.shape.audios, 1);
	assert_int_equal(info.shape.messages, 2);
	free(body);
	assert_int_equal(parse(FG_API_CHAT,
			       "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"video_url\","
			       "\"video_url\":{\"url\":\"x\"}},{\"type\":\"mystery\",\"text\":\"ab\",\"z\":\"cd\"}]}]}",
			       &info, msg, &param), 0);
	assert_int_equal(info.videos, 1);
	assert_int_equal(info.shape.prompt_chars, 4); /* an unknown part counts all its strings */
}

static void responses_requests_are_measured(void **state)
{
	(void)state;
	struct fg_req_info info;
	char msg[256];
	const char *param;

	assert_int_equal(parse(FG_API_RESPONSES,
			       "{\"model\":\"m\",\"input\":\"hello world\",\"instructions\":\"be brief\","
			       "\"max_output_tokens\":77,\"stream\":true,\"max_tokens\":5,\"n\":9}",
			       &info, msg, &param), 0);
	assert_int_equal(info.shape.prompt_chars, 11 + 8);
	assert_int_equal(info.shape.messages, 2);
	assert_int_equal(info.shape.max_tokens, 77); /* its own name; others are not its cap */
	assert_int_equal(info.shape.n, 1);
	assert_true(info.stream);
	assert_true(info.input_is_string);
	assert_int_equal(parse(FG_API_RESPONSES,
			       "{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"abc\"},"
			       "{\"type\":\"input_image\",\"image_url\":\"data:image/png;base64,QUJD\"}]},"
			       "{\"type\":\"function_call_output\",\"call_id\":\"c1\",\"output\":\"42\"}]}",
			       &info, msg, &param), 0);
	assert_int_equal(info.shape.prompt_chars, 3 + 2 + 2);
	assert_int_equal(info.shape.images, 1);
	assert_int_equal(info.shape.messages, 2);
	static const struct { const char *body, *param; } refused[] = {
		{ "{\"input\":\"x\",\"previous_response_id\":\"resp_1\"}", "previous_response_id" },
		{ "{\"input\":\"x\",\"background\":true}", "background" },
		{ "{\"input\":\"x\",\"prompt\":{\"id\":\"p\"}}", "prompt" },
		{ "{\"input\":\"x\",\"conversation\":\"c\"}", "conversation" },
		{ "{\"input\":[]}", "input" },
		{ "{\"input\":5}", "input" },
		{ "{\"input\":\"x\",\"instructions\":5}", "instructions" },
		{ "{\"input\":\"x\",\"max_output_tokens\":0}", "max_output_tokens" },
	};
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		assert_int_equal(parse(FG_API_RESPONSES, refused[i].body, &info, msg, &param), -1);
		assert_string_equal(param, refused[i].param);
	}
	assert_int_equal(parse(FG_API_RESPONSES,
			       "{\"input\":\"x\",\"previous_response_id\":null,\"background\":false}",
			       &info, msg, &param), 0);
}

static void choices_are_priced_as_the_engine_runs_them(void **state)
{
	(void)state;
	struct fg_req_info info;
	char msg[256];
	const char *param;

	assert_int_equal(parse(FG_API_COMPLETIONS, "{\"prompt\":[\"aaaa\",\"bbbbbbbb\",\"cc\"],\"n\":2}",
			       &info, msg, &param), 0);
	assert_int_equal(info.shape.prompts, 3);
	assert_int_equal(info.shape.prompt_chars, 14);
	assert_int_equal(info.shape.longest_chars, 8);
	assert_int_equal(parse(FG_API_COMPLETIONS, "{\"prompt\":[[1,2,3],[4,5,6,7,8]]}", &info, msg,
			       &param), 0);
	assert_int_equal(info.shape.prompts, 2);
	assert_int_equal(info.shape.prompt_token_ids, 8);
	assert_int_equal(info.shape.longest_token_ids, 5);
	assert_int_equal(parse(FG_API_COMPLETIONS, "{\"prompt\":[1,2,3]}", &info, msg, &param), 0);
	assert_int_equal(info.shape.prompts, 1);
	/* vLLM's V1 engine refuses best_of other than 1: so does the gateway */
	assert_int_equal(parse(FG_API_COMPLETIONS, "{\"prompt\":\"x\",\"best_of\":4}", &info, msg,
			       &param), -1);
	assert_string_equal(param, "best_of");
	assert_int_equal(parse(FG_API_CHAT, "{\"messages\":[{}],\"best_of\":\"2\"}", &info, msg,
			       &param), -1);
	assert_int_equal(parse(FG_API_CHAT, "{\"messages\":[{}],\"use_beam_search\":true}", &info,
			       msg, &param), -1);
	assert_string_equal(param, "use_beam_search");
	assert_int_equal(parse(FG_API_COMPLETIONS, "{\"prompt\":\"x\",\"best_of\":1,\"n\":1}", &info,
			       msg, &param), 0);
	assert_int_equal(parse(FG_API_CHAT, "{\"messages\":[{}],\"max_tokens\":0}", &info, msg,
			       &param), -1);
	assert_string_equal(param, "max_tokens");
	/* completions read max_tokens only, as vLLM's completions do */
	assert_int_equal(parse(FG_API_COMPLETIONS, "{\"prompt\":\"x\",\"max_completion_tokens\":9}",
			       &info, msg, &param), 0);
	assert_int_equal(info.shape.max_tokens, 0);
}

static void tokenizer_endpoints_are_measured(void **state)
{
	(void)state;
	struct fg_req_info info;
	char msg[256];
	const char *param;

	assert_int_equal(parse(FG_API_TOKENIZE, "{\"model\":\"m\",\"prompt\":\"abcdefgh\"}", &info, msg,
			       &param), 0);
	assert_true(info.shape.no_gpu && info.shape.prompt_only);
	assert_int_equal(info.shape.prompt_chars, 8);
	assert_int_equal(parse(FG_API_TOKENIZE, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
			       &info, msg, &param), 0);
	assert_true(info.shape.chat);
	assert_int_equal(parse(FG_API_DETOKENIZE, "{\"tokens\":[1,2,3,4]}", &info, msg, &param), 0);
	assert_int_equal(info.shape.prompt_token_ids, 4);
	assert_int_equal(parse(FG_API_DETOKENIZE, "{\"tokens\":[1,-2]}", &info, msg, &param), -1);
	assert_string_equal(param, "tokens");
	/* embeddings take a chat-shaped body in vLLM too */
	assert_int_equal(parse(FG_API_EMBEDDINGS, "{\"messages\":[{\"role\":\"user\",\"content\":\"abcd\"}]}",
			       &info, msg, &param), 0);
	assert_true(info.shape.chat && info.shape.prompt_only);
	assert_int_equal(info.shape.prompt_chars, 4);
	/* a passthrough body: only salt and priority matter */
	assert_int_equal(parse(FG_API_PASSTHROUGH, "{\"prompt\":5,\"cache_salt\":\"x\",\"priority\":3}",
			       &info, msg, &param), 0);
	assert_true(info.cache_salt.present && info.priority.present);
}

static char *forward(enum fg_api api, const char *body, const struct fg_rewrite *rw)
{
	struct fg_req_info info;
	char msg[256];
	const char *param;
	size_t len = 0;

	assert_int_equal(parse(api, body, &info, msg, &param), 0);
	char *out = fg_request_forward_body(&info, body, strlen(body), rw, &len);
	assert_non_null(out);
	json_t *j = json_loads(out, JSON_REJECT_DUPLICATES, NULL);
	assert_non_null(j);
	json_decref(j);
	return out;
}

/* The engine is told the cap that was reserved: the client's own caps are
 * cut and ours written, under each name the API's engine reads. */
static void the_forwarded_body_carries_the_reserved_cap(void **state)
{
	(void)state;
	struct fg_rewrite cap = { .max_tokens = 64 };
	char *out;

	out = forward(FG_API_CHAT, "{\"messages\":[{}]}", &cap);
	assert_string_equal(out, "{\"max_tokens\":64,\"max_completion_tokens\":64,\"messages\":[{}]}");
	free(out);
	out = forward(FG_API_CHAT, "{\"max_tokens\":5000,\"messages\":[{}],\"max_completion_tokens\":9000}",
		      &cap);
	assert_string_equal(out, "{\"max_tokens\":64,\"max_completion_tokens\":64,\"messages\":[{}]}");
	free(out);
	out = forward(FG_API_COMPLETIONS, "{\"prompt\":\"x\",\"max_tokens\":64}", &cap);
	assert_string_equal(out, "{\"max_tokens\":64,\"prompt\":\"x\"}");
	free(out);
	out = forward(FG_API_RESPONSES, "{\"input\":\"x\",\"max_output_tokens\":3000,\"stream\":true}", &cap);
	assert_string_equal(out, "{\"max_output_tokens\":64,\"input\":\"x\",\"stream\":true}");
	free(out);
	/* no cap written (embeddings): the client's members stay where they are */
	out = forward(FG_API_EMBEDDINGS, "{\"input\":\"x\",\"max_tokens\":3}", &(struct fg_rewrite){ 0 });
	assert_string_equal(out, "{\"input\":\"x\",\"max_tokens\":3}");
	free(out);
	/* with forced usage, the client's own continuous_usage_stats is ours */
	out = forward(FG_API_CHAT,
		      "{\"messages\":[{}],\"stream\":true,\"stream_options\":{\"continuous_usage_stats\":false,\"x\":1}}",
		      &(struct fg_rewrite){ .force_usage = true, .max_tokens = 8 });
	assert_string_equal(out, "{\"max_tokens\":8,\"max_completion_tokens\":8,\"stream_options\":"
				 "{\"include_usage\":true,\"continuous_usage_stats\":true,\"x\":1},"
				 "\"messages\":[{}],\"stream\":true}");
	free(out);
}

static char *tokenize_body(enum fg_api api, const char *body)
{
	struct fg_req_info info;
	char msg[256];
	const char *param;
	size_t len = 0;

	assert_int_equal(parse(api, body, &info, msg, &param), 0);
	char *out = fg_tokenize_body(&info, body, strlen(body), &len);
	if (out)
		assert_int_equal(strlen(out), len);
	return out;
}

static void the_tokenize_body_has_the_request_s_shape(void **state)
{
	(void)state;
	char *t;

	t = tokenize_body(FG_API_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
				       "\"max_tokens\":9,\"tools\":[],\"stream\":true,\"chat_template_kwargs\":{}}");
	assert_string_equal(t, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
			       "\"tools\":[],\"chat_template_kwargs\":{}}");
	free(t);
	t = tokenize_body(FG_API_COMPLETIONS, "{\"prompt\": \"abc\",\"model\":\"m\",\"n\":3}");
	assert_string_equal(t, "{\"model\":\"m\",\"prompt\":\"abc\"}");
	free(t);
	t = tokenize_body(FG_API_EMBEDDINGS, "{\"input\":\"abc\"}");
	assert_string_equal(t, "{\"prompt\":\"abc\"}");
	free(t);
	t = tokenize_body(FG_API_RESPONSES, "{\"model\":\"m\",\"instructions\":\"sys\",\"input\":\"hello\"}");
	assert_string_equal(t, "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"sys\"},"
			       "{\"role\":\"user\",\"content\":\"hello\"}]}");
	free(t);
	t = tokenize_body(FG_API_RESPONSES, "{\"input\":[{\"role\":\"user\",\"content\":\"a\"} ] }");
	assert_string_equal(t, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"} ]}");
	free(t);
	/* what one call cannot count */
	assert_null(tokenize_body(FG_API_COMPLETIONS, "{\"prompt\":[\"a\",\"b\"]}"));
	assert_null(tokenize_body(FG_API_COMPLETIONS, "{\"prompt\":[1,2]}"));
}

static void the_tokenize_answer_is_read(void **state)
{
	(void)state;
	uint64_t count, max_len;
	static const char ok[] = "{\"count\":5,\"max_model_len\":4096,\"tokens\":[1,2,3,4,5],\"token_strs\":null}";
	static const char later[] = "{\"tokens\":[1],\"count\":1}";

	assert_int_equal(fg_tokenize_answer(ok, strlen(ok), &count, &max_len), 0);
	assert_int_equal(count, 5);
	assert_int_equal(max_len, 4096);
	assert_int_equal(fg_tokenize_answer(later, strlen(later), &count, &max_len), 0);
	assert_int_equal(count, 1);
	assert_int_equal(max_len, 0);
	static const char *const bad[] = {
		"", "[]", "{}", "{\"count\":-1}", "{\"count\":1.5}", "{\"count\":\"5\"}",
		"{\"count\":[5]}", "{\"count\":5", "{\"count\":5,\"max_model_len\":4096", "nope",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = fg_tokenize_answer(bad[i], strlen(bad[i]), &count, &max_len);
		/* a complete count and length at the front are enough (the rest is ids) */
		if (i == 8)
			assert_int_equal(rc, 0);
		else if (rc != -1) {
			print_error("answer %zu (%s) was read\n", i, bad[i]);
			fail();
		}
	}
}

/* Chunks with continuous usage, as vLLM sends them with
 * stream_options.continuous_usage_stats. */
#define CU(p, c) ",\"usage\":{\"prompt_tokens\":" #p ",\"total_tokens\":" #p ",\"completion_tokens\":" #c "}"
#define CHUNK(content, usage) \
	"data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" content "\"}}]" usage "}\n\n"
static const char continuous[] = CHUNK("", CU(12, 0)) CHUNK("a", CU(12, 1)) CHUNK("b", CU(12, 2))
	"data: {\"id\":\"c\",\"choices\":[]" CU(12, 2) "}\n\ndata: [DONE]\n\n";

static void relay(struct fg_sse *s, const char *text, size_t piece, struct fg_buf *out)
{
	size_t n = strlen(text);

	for (size_t off = 0; off < n; off += piece)
		assert_int_equal(fg_sse_feed(s, text + off, off + piece > n ? n - off : piece, out), 0);
	assert_int_equal(fg_sse_finish(s, out), 0);
}

static bool heard_ok(void *ctx, double prompt)
{
	*(double *)ctx = prompt;
	return true;
}

static bool heard_stop(void *ctx, double prompt)
{
	*(double *)ctx = prompt;
	return false;
}

static void continuous_usage_is_cut_for_clients_that_did_not_ask(void **state)
{
	(void)state;
	static const size_t pieces[] = { 1, 3, 17, 4096 };
	static const char want[] = CHUNK("", "") CHUNK("a", "") CHUNK("b", "") "data: [DONE]\n\n";
	static const char want_usage[] = CHUNK("", "") CHUNK("a", "") CHUNK("b", "")
		"data: {\"id\":\"c\",\"choices\":[]" CU(12, 2) "}\n\ndata: [DONE]\n\n";

	for (size_t i = 0; i < sizeof(pieces) / sizeof(pieces[0]); i++) {
		struct fg_sse s;
		struct fg_buf out = { 0 };
		double heard = -1;
		/* asked for neither: the chunks read as without the options */
		fg_sse_init(&s, FG_SSE_CHUNKS, true, true);
		s.on_prompt = heard_ok;
		s.ctx = &heard;
		relay(&s, continuous, pieces[i], &out);
		assert_int_equal(fg_buf_used(&out), strlen(want));
		assert_memory_equal(fg_buf_head(&out), want, strlen(want));
		assert_true(heard == 12);
		assert_true(s.usage.completion_tokens == 2);
		assert_true(fg_sse_output(&s) == 2);
		fg_sse_free(&s);
		fg_buf_free(&out);
		/* asked for include_usage only */
		fg_sse_init(&s, FG_SSE_CHUNKS, false, true);
		relay(&s, continuous, pieces[i], &out);
		assert_int_equal(fg_buf_used(&out), strlen(want_usage));
		assert_memory_equal(fg_buf_head(&out), want_usage, strlen(want_usage));
		fg_sse_free(&s);
		fg_buf_free(&out);
		/* asked for both: byte for byte */
		fg_sse_init(&s, FG_SSE_CHUNKS, false, false);
		relay(&s, continuous, pieces[i], &out);
		assert_int_equal(fg_buf_used(&out), strlen(continuous));
		fg_sse_free(&s);
		fg_buf_free(&out);
	}
}

/* A prompt over a limit stops the relay at the first chunk: nothing of it
 * or after it reaches the client. */
static void the_first_prompt_count_can_stop_the_stream(void **state)
{
	(void)state;
	struct fg_sse s;
	struct fg_buf out = { 0 };
	double heard = -1;

	fg_sse_init(&s, FG_SSE_CHUNKS, true, true);
	s.on_prompt = heard_stop;
	s.ctx = &heard;
	relay(&s, continuous, 5, &out);
	assert_true(s.stopped);
	assert_true(heard == 12);
	assert_int_equal(fg_buf_used(&out), 0);
	assert_true(s.have_usage && s.usage.prompt_tokens == 12);
	fg_sse_free(&s);
	fg_buf_free(&out);
}

/* Before the final usage, a chunk's usage is one choice's running count:
 * what was delivered is every choice's tokens (the role chunks are none). */
static void output_so_far_counts_every_choice(void **state)
{
	(void)state;
#define ROLE(i, u) "data: {\"choices\":[{\"index\":" #i ",\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]" u "}\n\n"
#define TOK(i, u) "data: {\"choices\":[{\"index\":" #i ",\"delta\":{\"content\":\"x\"}}]" u "}\n\n"
	static const char text[] = ROLE(0, CU(5, 0)) ROLE(1, CU(5, 0)) TOK(0, CU(5, 1)) TOK(1, CU(5, 1))
		TOK(0, CU(5, 2)) TOK(1, CU(5, 2));
	struct fg_sse s;
	struct fg_buf out = { 0 };

	fg_sse_init(&s, FG_SSE_CHUNKS, true, true);
	relay(&s, text, 9, &out);
	assert_int_equal(s.content_events, 4);
	assert_true(s.usage.completion_tokens == 2);
	assert_false(s.final_usage);
	assert_true(fg_sse_output(&s) == 4);
	assert_true(s.usage.prompt_tokens == 5);
	fg_sse_free(&s);
	fg_buf_free(&out);
}

static void responses_events_give_usage_and_output(void **state)
{
	(void)state;
	static const char text[] =
		"event: response.created\ndata: {\"response\":{\"id\":\"r\",\"usage\":null},\"sequence_number\":0,\"type\":\"response.created\"}\n\n"
		"event: response.output_text.delta\ndata: {\"content_index\":0,\"delta\":\"Hi \\\"there\\\"\",\"type\":\"response.output_text.delta\"}\n\n"
		"data: {\"delta\":\"!\",\"item_id\":\"m\",\"type\":\"response.output_text.delta\"}\n\n"
		"event: response.completed\ndata: {\"response\":{\"id\":\"r\",\"output\":[{\"type\":\"message\"}],"
		"\"usage\":{\"input_tokens\":100,\"input_tokens_details\":{\"cached_tokens\":64},"
		"\"output_tokens\":5000,\"output_tokens_details\":{\"reasoning_tokens\":0},\"total_tokens\":5100}},"
		"\"sequence_number\":9,\"type\":\"response.completed\"}\n\n";
	struct fg_sse s;
	struct fg_buf out = { 0 };

	fg_sse_init(&s, FG_SSE_RESPONSES, false, false);
	relay(&s, text, 7, &out);
	assert_int_equal(fg_buf_used(&out), strlen(text)); /* untouched */
	assert_int_equal(s.content_events, 2);
	assert_true(s.have_usage);
	assert_true(s.usage.prompt_tokens == 100);
	assert_true(s.usage.cached_tokens == 64);
	assert_true(s.usage.completion_tokens == 5000);
	fg_sse_free(&s);
	fg_buf_free(&out);
}

static void responses_usage_reads_under_its_names(void **state)
{
	(void)state;
	struct fg_usage u;
	static const char resp[] = "{\"input_tokens\":100,\"input_tokens_details\":{\"cached_tokens\":7},"
				   "\"output_tokens\":5000,\"total_tokens\":5100}";
	/* both names: the chat name wins in either reader */
	static const char both[] = "{\"input_tokens\":1,\"prompt_tokens\":2,\"output_tokens\":3}";

	assert_int_equal(fg_usage_parse(resp, strlen(resp), &u), 1);
	assert_true(u.prompt_tokens == 100 && u.cached_tokens == 7 && u.completion_tokens == 5000);
	assert_int_equal(fg_usage_parse(both, strlen(both), &u), 1);
	assert_true(u.prompt_tokens == 2 && u.completion_tokens == 3);
	json_t *o = json_pack("{s:{s:i, s:i, s:i}}", "usage", "input_tokens", 1, "prompt_tokens", 2,
			      "output_tokens", 3);
	assert_true(fg_usage_from_json(o, &u));
	assert_true(u.prompt_tokens == 2 && u.completion_tokens == 3);
	json_decref(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(routes_deny_by_default),
		cmocka_unit_test(passthrough_entries_route_with_their_price),
		cmocka_unit_test(chat_parts_count_by_type),
		cmocka_unit_test(responses_requests_are_measured),
		cmocka_unit_test(choices_are_priced_as_the_engine_runs_them),
		cmocka_unit_test(tokenizer_endpoints_are_measured),
		cmocka_unit_test(the_forwarded_body_carries_the_reserved_cap),
		cmocka_unit_test(the_tokenize_body_has_the_request_s_shape),
		cmocka_unit_test(the_tokenize_answer_is_read),
		cmocka_unit_test(continuous_usage_is_cut_for_clients_that_did_not_ask),
		cmocka_unit_test(the_first_prompt_count_can_stop_the_stream),
		cmocka_unit_test(output_so_far_counts_every_choice),
		cmocka_unit_test(responses_events_give_usage_and_output),
		cmocka_unit_test(responses_usage_reads_under_its_names),
	};
	return cmocka_run_group_tests_name("metering", tests, NULL, NULL);
}
