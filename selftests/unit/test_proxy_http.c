/* test_proxy_http.c — the proxy's pure pieces: request JSON validation,
 * measurement and rewrite (cache_salt, stream usage, priority), the SSE
 * relay (usage chunk hidden, usage extracted, events split across reads),
 * the streaming usage reader (differential against jansson), the fast
 * request and response head readers (differential against http_parser),
 * cache salts, API-key hashing, Bearer parsing and trusted-source CIDRs. */
#include <arpa/inet.h>
#include <http_parser.h>
#include <jansson.h>
#include <limits.h>
#include <netinet/in.h>
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
#include "agent/proxy/identity.h"
#include "agent/proxy/proxy_internal.h"
#include "agent/proxy/salt.h"
#include "selftests/common/http_head_diff.h"
#include "selftests/common/request_scan_diff.h"

/* 0 when accepted */
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

static void chat_is_measured(void **state)
{
	(void)state;
	struct fg_req_info info;
	char msg[256];
	const char *param;
	int rc = parse(FG_API_CHAT,
			     "{\"model\":\"m1\",\"messages\":[{\"role\":\"user\",\"content\":\"abcdefgh\"},"
			     "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"xyz\"}]}],"
			     "\"max_tokens\":50,\"max_completion_tokens\":70,\"n\":2,\"stream\":true}",
			     &info, msg, &param);
	assert_int_equal(rc, 0);
	assert_string_equal(info.model, "m1");
	/* the text the template sees: contents, a text part's text (roles and
	 * part types are the template's framing, counted per message) */
	assert_int_equal(info.shape.prompt_chars, 8 + 3);
	assert_int_equal(info.shape.messages, 2);
	assert_true(info.shape.chat);
	assert_int_equal(info.shape.max_tokens, 70); /* max_completion_tokens wins */
	assert_int_equal(info.shape.n, 2);
	assert_true(info.stream);
	assert_false(info.client_wants_usage);
}

static void completions_prompt_forms(void **state)
{
	(void)state;
	struct fg_req_info info;
	char msg[256];
	const char *param;
	assert_int_equal(parse(FG_API_COMPLETIONS, "{\"prompt\":[[1,2,3],[4,5]],\"max_tokens\":null}",
			       &info, msg, &param), 0);
	assert_int_equal(info.shape.prompt_token_ids, 5);
	assert_int_equal(info.shape.max_tokens, 0); /* null = absent */
	assert_int_equal(parse(FG_API_COMPLETIONS, "{\"prompt\":[[1,[2]]]}", &info, msg, &param), -1);
	assert_int_equal(parse(FG_API_COMPLETIONS, "{\"prompt\":[[],[7]]}", &info, msg, &param), 0);
	assert_int_equal(info.shape.prompt_token_ids, 1);
	assert_int_equal(parse(FG_API_COMPLETIONS, "{\"prompt\":[1,2,3]}", &info, msg, &param), 0);
	assert_int_equal(info.shape.prompt_token_ids, 3);
	assert_int_equal(parse(FG_API_COMPLETIONS, "{\"prompt\":[\"ab\",\"cde\"]}", &info, msg, &param), 0);
	assert_int_equal(info.shape.prompt_chars, 5);
	/* escapes count as the characters they stand for */
	assert_int_equal(parse(FG_API_COMPLETIONS, "{\"prompt\":\"a\\n\\u00e9\\ud83d\\ude00\"}", &info,
			       msg, &param), 0);
	assert_int_equal(info.shape.prompt_chars, 1 + 1 + 2 + 4);
	assert_int_equal(parse(FG_API_EMBEDDINGS, "{\"input\":\"hello\"}", &info, msg, &param), 0);
	assert_true(info.shape.prompt_only);
}

static void bad_requests_name_the_parameter(void **state)
{
	(void)state;
	static const struct {
		enum fg_api api;
		const char *body, *param;
	} cases[] = {
		{ FG_API_CHAT, "", NULL },
		{ FG_API_CHAT, "{\"messages\": [", NULL },
		{ FG_API_CHAT, "[1,2]", NULL },
		{ FG_API_CHAT, "{\"a\":1,\"a\":2,\"messages\":[{}]}", NULL }, /* duplicate keys */
		{ FG_API_CHAT, "{\"messages\":[]}", "messages" },
		{ FG_API_CHAT, "{\"messages\":[\"hi\"]}", "messages" },
		{ FG_API_CHAT, "{\"model\":5,\"messages\":[{}]}", "model" },
		{ FG_API_CHAT, "{\"messages\":[{}],\"max_tokens\":-1}", "max_tokens" },
		{ FG_API_CHAT, "{\"messages\":[{}],\"max_tokens\":1.5}", "max_tokens" },
		{ FG_API_CHAT, "{\"messages\":[{}],\"max_completion_tokens\":\"9\"}", "max_completion_tokens" },
		{ FG_API_CHAT, "{\"messages\":[{}],\"n\":0}", "n" },
		{ FG_API_CHAT, "{\"messages\":[{}],\"n\":1000}", "n" },
		{ FG_API_CHAT, "{\"messages\":[{}],\"stream\":\"yes\"}", "stream" },
		{ FG_API_CHAT, "{\"messages\":[{}],\"stream_options\":[]}", "stream_options" },
		{ FG_API_CHAT, "{\"messages\":[{}],\"stream_options\":{\"include_usage\":1}}",
		  "stream_options.include_usage" },
		{ FG_API_COMPLETIONS, "{\"prompt\":5}", "prompt" },
		{ FG_API_COMPLETIONS, "{\"prompt\":[]}", "prompt" },
		{ FG_API_COMPLETIONS, "{\"prompt\":[[1,\"a\"]]}", "prompt" },
		{ FG_API_EMBEDDINGS, "{}", "input" },
		/* what the streaming pass must refuse like a full parse did */
		{ FG_API_CHAT, "{\"messages\":[{\"a\":1,\"\\u0061\":2}]}", NULL }, /* nested duplicate */
		{ FG_API_CHAT, "{\"messages\":[{\"k0\":0,\"k1\":1,\"k2\":2,\"k3\":3,\"k4\":4,\"k5\":5,"
			       "\"k6\":6,\"k7\":7,\"k8\":8,\"k9\":9,\"k3\":10}]}", NULL }, /* sorted check */
		{ FG_API_CHAT, "{\"messages\":[{}]} {}", NULL },                /* trailing value */
		{ FG_API_CHAT, "{\"messages\":[{}],}", NULL },                  /* trailing comma */
		{ FG_API_CHAT, "{\"messages\":[{\"content\":\"\\u0000\"}]}", NULL },
		{ FG_API_CHAT, "{\"messages\":[{\"content\":\"\\ud800\"}]}", NULL },
		{ FG_API_CHAT, "{\"messages\":[{\"content\":\"\\udc00\"}]}", NULL },
		{ FG_API_CHAT, "{\"messages\":[{\"content\":\"\\ud800\\u0041\"}]}", NULL },
		{ FG_API_CHAT, "{\"messages\":[{\"content\":\"\xc0\xaf\"}]}", NULL }, /* overlong */
		{ FG_API_CHAT, "{\"messages\":[{\"content\":\"\xed\xa0\x80\"}]}", NULL }, /* surrogate */
		{ FG_API_CHAT, "{\"messages\":[{\"content\":\"\xf4\x90\x80\x80\"}]}", NULL },
		{ FG_API_CHAT, "{\"messages\":[{\"content\":\"\xe2\x82\"}]}", NULL }, /* truncated */
		{ FG_API_CHAT, "{\"messages\":[{}],\"x\":1e400}", NULL },
		{ FG_API_CHAT, "{\"messages\":[{}],\"x\":9223372036854775808}", NULL },
		{ FG_API_CHAT, "{\"messages\":[{}],\"x\":01}", NULL },
		{ FG_API_CHAT, "{\"messages\":[{}],\"x\":tru}", NULL },
		{ FG_API_CHAT, "{\"messages\":[{}],\"x\":\"a\tb\"}", NULL }, /* raw control char */
		{ FG_API_CHAT, "{\"messages\":[{}],/*c*/\"x\":1}", NULL },
		{ FG_API_CHAT, "\xef\xbb\xbf{\"messages\":[{}]}", NULL },   /* BOM */
		{ FG_API_CHAT, "   ", NULL },
		{ FG_API_CHAT, "{\"\":1,\"\":2,\"messages\":[{}]}", NULL },     /* empty keys too */
		{ FG_API_CHAT, "{\"messages\":[{}]}\"unfinished", NULL },  /* yajl passes this */
		{ FG_API_CHAT, "{\"messages\":[{}]}\f", NULL },            /* not JSON whitespace */
		{ FG_API_CHAT, "{\"messages\":[{}],\v\"n\":1}", NULL },
		{ FG_API_CHAT, "\"messages\"", NULL },
		{ FG_API_CHAT, "{\"messages\":[{}],\"n\":2.0}", "n" },
		{ FG_API_CHAT, "{\"messages\":[{}],\"max_tokens\":1e2}", "max_tokens" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct fg_req_info info;
		char msg[256] = "";
		const char *param = "unset";
		if (!parse(cases[i].api, cases[i].body, &info, msg, &param)) {
			print_error("case %zu (%s) was accepted\n", i, cases[i].body);
			fail();
		}
		assert_true(strlen(msg) > 0);
		if (cases[i].param)
			assert_string_equal(param, cases[i].param);
		else
			assert_null(param);
	}
}

/* Edge values the pass accepts, as a full parse did. */
static void valid_edges_are_accepted(void **state)
{
	(void)state;
	static const char *const bodies[] = {
		"{\"messages\":[{}],\"x\":-9223372036854775808,\"y\":1e-400,\"z\":-0.5E+3}",
		"{\"messages\":[{\"content\":\"\\ud83d\\ude00 \\\" \\\\ \\/ \xc3\xa9 \xf0\x9f\x98\x80\"}]}",
		"\r\n\t {\"messages\":[{\"\":\"\",\"a\\u0000b\":0}]}\n",
		"{\"messages\":[{}],\"x\":{\"y\":{\"messages\":1,\"model\":2}}}", /* nested names are not members */
	};
	for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		struct fg_req_info info;
		char msg[256] = "";
		const char *param;
		int rc = parse(FG_API_CHAT, bodies[i], &info, msg, &param);
		if (i == 2) { /* a NUL in a key is refused like one in a value */
			assert_int_equal(rc, -1);
			continue;
		}
		if (rc)
			print_error("case %zu refused: %s\n", i, msg);
		assert_int_equal(rc, 0);
	}
}

static char *forward(const char *body, const struct fg_rewrite *rw)
{
	struct fg_req_info info;
	char msg[256];
	const char *param;
	size_t len = 0;

	assert_int_equal(parse(FG_API_CHAT, body, &info, msg, &param), 0);
	char *out = fg_request_forward_body(&info, body, strlen(body), rw, &len);
	assert_non_null(out);
	assert_int_equal(strlen(out), len);
	json_t *fwd = json_loads(out, JSON_REJECT_DUPLICATES, NULL);
	assert_non_null(fwd); /* always one valid object */
	json_decref(fwd);
	return out;
}

static void forward_body_splices(void **state)
{
	(void)state;
	struct fg_rewrite salted = { .cache_salt = "fg1-a-01", .force_usage = true };
	struct fg_rewrite shared = { .set_priority = true, .priority = 2 };
	char *out;

	/* nothing to replace: the client's bytes follow untouched */
	out = forward("  {\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":true}", &salted);
	assert_string_equal(out, "{\"cache_salt\":\"fg1-a-01\",\"stream_options\":{\"include_usage\":true,\"continuous_usage_stats\":true},"
				 "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":true}");
	free(out);
	/* a client's salt and priority are cut wherever they are; its other
	 * stream_options members are carried into ours */
	out = forward("{\"cache_salt\":\"theirs\",\"messages\":[{\"content\":\"x\"}],\"priority\":-5 ,"
		      "\"stream\":true,\"stream_options\":{\"include_usage\":false, \"continuous_usage_stats\":true}}",
		      &salted);
	assert_string_equal(out, "{\"cache_salt\":\"fg1-a-01\",\"stream_options\":{\"include_usage\":true,"
				 "\"continuous_usage_stats\":true},\"messages\":[{\"content\":\"x\"}],"
				 "\"stream\":true}");
	free(out);
	/* shared tenant: no salt at all, the engine's priority, stream_options kept */
	out = forward("{\"messages\":[{}],\"cache_salt\":\"theirs\",\"stream_options\":{\"include_usage\":false},"
		      "\"priority\":9}", &shared);
	assert_string_equal(out, "{\"priority\":2,\"messages\":[{}],\"stream_options\":{\"include_usage\":false}}");
	free(out);
	/* only members the rewrite owns: no stray comma either way */
	out = forward("{\"messages\":[{}]}", &(struct fg_rewrite){ 0 });
	assert_string_equal(out, "{\"messages\":[{}]}");
	free(out);
	out = forward("{ \"priority\":1, \"messages\":[{}] , \"cache_salt\":\"a\" }", &(struct fg_rewrite){ 0 });
	assert_string_equal(out, "{ \"messages\":[{}] }");
	free(out);
	out = forward("{\"messages\":[{}],\"stream_options\":null,\"cache_salt\":\"a\"}", &salted);
	assert_string_equal(out, "{\"cache_salt\":\"fg1-a-01\",\"stream_options\":{\"include_usage\":true,\"continuous_usage_stats\":true},"
				 "\"messages\":[{}]}");
	free(out);
	out = forward("{\"stream_options\":{\"include_usage\":true},\"messages\":[{}]}", &salted);
	assert_string_equal(out, "{\"cache_salt\":\"fg1-a-01\",\"stream_options\":{\"include_usage\":true,\"continuous_usage_stats\":true},"
				 "\"messages\":[{}]}");
	free(out);
	/* escaped keys are the members they name */
	out = forward("{\"messages\":[{}],\"cache_\\u0073alt\":\"x\"}", &shared);
	assert_string_equal(out, "{\"priority\":2,\"messages\":[{}]}");
	free(out);
}

#define USAGE_CHUNK                                                                         \
	"data: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":3," \
	"\"prompt_tokens_details\":{\"cached_tokens\":8}}}\n\n"
#define CONTENT(t) "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" t "\"}}]}\n\n"

static const char stream_text[] = CONTENT("a") CONTENT("b") ": comment\n\n" CONTENT("c") USAGE_CHUNK
	"data: [DONE]\n\n";

static void relay(struct fg_sse *s, size_t piece, struct fg_buf *out)
{
	size_t n = strlen(stream_text);

	for (size_t off = 0; off < n; off += piece)
		assert_int_equal(fg_sse_feed(s, stream_text + off, off + piece > n ? n - off : piece, out), 0);
	assert_int_equal(fg_sse_finish(s, out), 0);
}

static void sse_hides_forced_usage_chunk(void **state)
{
	(void)state;
	static const size_t pieces[] = { 1, 2, 3, 7, 50, 4096 };
	char want[sizeof(stream_text)];

	/* expected: everything but the usage chunk, byte for byte */
	snprintf(want, sizeof(want), "%s", CONTENT("a") CONTENT("b") ": comment\n\n" CONTENT("c")
		 "data: [DONE]\n\n");
	for (size_t i = 0; i < sizeof(pieces) / sizeof(pieces[0]); i++) {
		struct fg_sse s;
		struct fg_buf out = { 0 };
		fg_sse_init(&s, FG_SSE_CHUNKS, true, false);
		relay(&s, pieces[i], &out);
		assert_int_equal(fg_buf_used(&out), strlen(want));
		assert_memory_equal(fg_buf_head(&out), want, strlen(want));
		assert_true(s.have_usage);
		assert_true(s.usage.prompt_tokens == 12);
		assert_true(s.usage.completion_tokens == 3);
		assert_true(s.usage.cached_tokens == 8);
		assert_int_equal(s.content_events, 3); /* the deltas; comments carry no tokens */
		assert_true(s.saw_done);
		fg_sse_free(&s);
		fg_buf_free(&out);
	}
}

static void sse_keeps_usage_when_asked(void **state)
{
	(void)state;
	struct fg_sse s;
	struct fg_buf out = { 0 };

	fg_sse_init(&s, FG_SSE_CHUNKS, false, false);
	relay(&s, 5, &out);
	assert_int_equal(fg_buf_used(&out), strlen(stream_text));
	assert_memory_equal(fg_buf_head(&out), stream_text, strlen(stream_text));
	assert_true(s.have_usage);
	fg_sse_free(&s);
	fg_buf_free(&out);
}

static void sse_crlf_and_garbage_pass_through(void **state)
{
	(void)state;
	static const char text[] = "data: {not json \"usage\"\r\n\r\ndata: x\r\rtail-without-end";
	struct fg_sse s;
	struct fg_buf out = { 0 };

	fg_sse_init(&s, FG_SSE_CHUNKS, true, false);
	assert_int_equal(fg_sse_feed(&s, text, strlen(text), &out), 0);
	assert_int_equal(fg_sse_finish(&s, &out), 0);
	assert_int_equal(fg_buf_used(&out), strlen(text));
	assert_false(s.have_usage);
	fg_sse_free(&s);
	fg_buf_free(&out);
}

/* jansson's verdict on a usage object (what the proxy did before the yajl
 * reader): -1 not an object / malformed, else fg_usage_from_json's. */
static int usage_by_jansson(const char *text, struct fg_usage *u)
{
	json_t *v = json_loadb(text, strlen(text), JSON_DISABLE_EOF_CHECK, NULL);
	int r = -1;

	if (json_is_object(v)) {
		json_t *wrap = json_pack("{s:O}", "usage", v);
		r = fg_usage_from_json(wrap, u);
		json_decref(wrap);
	}
	json_decref(v);
	return r;
}

static void usage_reader_agrees_with_jansson(void **state)
{
	(void)state;
	static const struct {
		const char *text;
		bool fast; /* the yajl reader decides (no fallback) */
	} cases[] = {
		{ "{\"prompt_tokens\":8,\"total_tokens\":12,\"completion_tokens\":4,"
		  "\"prompt_tokens_details\":null}}", true },
		{ "{\"prompt_tokens\":8,\"completion_tokens\":4,"
		  "\"prompt_tokens_details\":{\"cached_tokens\":5}} ,\"x\":1}", true },
		{ "{\"prompt_tokens\":8,\"prompt_tokens\":9}", true },
		{ "{\"prompt_tokens\":8,\"prompt_tokens\":\"9\"}", true },
		{ "{\"prompt_tokens_details\":{\"cached_tokens\":5},\"prompt_tokens_details\":null}", true },
		{ "{\"prompt_tokens_details\":{\"cached_tokens\":5,\"cached_tokens\":6}}", true },
		{ "{\"prompt_tokens_details\":{\"x\":{\"cached_tokens\":7},\"cached_tokens\":2}}", true },
		{ "{\"prompt_tokens_details\":{\"cached_tokens\":[1]}}", true },
		{ "{\"prompt_tokens\":\"8\",\"completion_tokens\":true}", true },
		{ "{\"x\":[1,{\"prompt_tokens\":5}],\"prompt_tokens\":3,\"y\":{\"completion_tokens\":1}}", true },
		{ "{\"prompt_tokens\":-1,\"completion_tokens\":4}", true },
		{ "{\"completion_tokens\":2e9}", true },
		{ "{\"completion_tokens\":1e9,\"prompt_tokens\":8.5,\"z\":-0.0}", true },
		{ "{\"prompt_tokens_details\":{\"cached_tokens\":-3}}", true },
		{ "{}", true },
		{ " \n{\"prompt_tokens\":1}garbage", true },
		{ "null", false },
		{ "[1]", false },
		{ "\"usage\"", false },
		{ "7", false },
		{ "{\"prompt_tokens\":8", false },
		{ "{\"prompt_tokens\":01}", false },
		{ "{\"prompt_tokens\":99999999999999999999}", false },
		{ "{\"prompt_tokens\":1e999}", false },
		{ "{\"prompt_tokens\":1,\"k\":\"a\\u0000b\"}", false },
		{ "{\"prompt_tokens\":1,\"k\":\"\\ud800\"}", false },
		{ "{\f\"prompt_tokens\":1}", false },
		{ "{\"prompt_tokens\":1,}", false },
		{ "{\"k\xc0\xb6\":1,\"prompt_tokens\":2}", false }, /* overlong UTF-8 */
		{ "{\"k\xc3\xa9\":1,\"prompt_tokens\":2}", false }, /* any UTF-8 beyond ASCII */
		/* the hand-read common shape and its edges */
		{ " { \"prompt_tokens\" : 12 ,\n\"completion_tokens\":\t3 , \"prompt_tokens_details\" : "
		  "{ \"cached_tokens\" : 4 } } ", true },
		{ "{\"prompt_tokens\":0,\"completion_tokens\":0,\"prompt_tokens_details\":{}}", true },
		{ "{\"prompt_tokens\":999999999999999999,\"completion_tokens\":1}", true },
		{ "{\"prompt_tokens\":1234567890123456789,\"completion_tokens\":1}", true },
		{ "{\"prompt_tokens\":7,\"completion_tokens\":null,\"cached_tokens\":9}", true },
		{ "{\"prompt_tokens_details\":3,\"prompt_tokens\":2}", true },
		{ "{\"prompt_tokens_details\":{\"cached_tokens\":5},\"prompt_tokens_details\":4}", true },
		{ "{\"prompt_tokens\":1.0,\"completion_tokens\":2E1}", true },
		{ "{\"prompt_tokens\":nul}", false },
		{ "{\"prompt_tokens\":1 2}", false },
		{ "{\"prompt_tokens\" 1}", false },
		{ "{\"prompt_tokens\":1,,\"completion_tokens\":1}", false },
	};
	char deep[300];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct fg_usage want = { 0 }, got = { 0 };
		int ref = usage_by_jansson(cases[i].text, &want);
		int r = fg_usage_parse(cases[i].text, strlen(cases[i].text), &got);
		if (cases[i].fast)
			assert_int_not_equal(r, -1);
		else
			assert_int_equal(r, -1);
		if (r == -1)
			continue; /* the caller asks jansson */
		assert_int_equal(r, ref);
		if (r == 1) {
			assert_true(got.prompt_tokens == want.prompt_tokens);
			assert_true(got.completion_tokens == want.completion_tokens);
			assert_true(got.cached_tokens == want.cached_tokens);
		}
	}
	/* nesting deeper than the reader follows: jansson decides */
	size_t n = 0;
	n += (size_t)snprintf(deep + n, sizeof(deep) - n, "{\"x\":");
	for (int i = 0; i < 100; i++)
		deep[n++] = '[';
	for (int i = 0; i < 100; i++)
		deep[n++] = ']';
	snprintf(deep + n, sizeof(deep) - n, ",\"prompt_tokens\":2}");
	struct fg_usage u;
	assert_int_equal(fg_usage_parse(deep, strlen(deep), &u), -1);
}

/* ---- fast heads: fg_resp_head_fast / fg_req_head_fast against http_parser ---- */

struct head_case {
	const char *text;
	bool fast; /* read by the fast reader; otherwise left to http_parser */
};

static void expect_head_cases(const struct head_case *cases, size_t n, bool request)
{
	for (size_t i = 0; i < n; i++) {
		const char *why;
		int rc = head_diff(cases[i].text, strlen(cases[i].text), request, &why);

		if (rc != (cases[i].fast ? 1 : 0))
			fail_msg("%s case %zu: %s", request ? "request" : "response", i,
				 why ? why : cases[i].fast ? "declined" : "taken");
	}
}

static void response_head_fast_agrees_with_http_parser(void **state)
{
	(void)state;
	static const struct head_case cases[] = {
		{ "HTTP/1.1 200 OK\r\nServer: fairgate-sim\r\nContent-Type: application/json\r\n"
		  "Content-Length: 413\r\nx-request-id: chatcmpl-1\r\nx-sim-ttft-ms: 0.035\r\n\r\n{\"id\"", true },
		{ "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nX:  \t padded\r\n\r\n", true },
		{ "HTTP/1.1 503 \r\nContent-Length: 12\r\nRetry-After: 1\r\nv: caf\xc3\xa9\r\n\r\n", true },
		{ "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", false },
		{ "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello", false },
		{ "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: x\n\n", false },
		{ "HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\nhello", false },
		{ "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false },
		{ "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n", false },
		{ "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello", false },
		{ "HTTP/1.1 200 OK\r\nContent-Length: 5 \r\n\r\nhello", false },
		{ "HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\nhello", false },
		{ "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Fold: a\r\n b\r\n\r\nhello", false },
		{ "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Empty:\r\n\r\nhello", false },
		{ "HTTP/1.1 200 OK\r\nContent-Length: 5\nX: y\r\n\r\nhello", false },
		{ "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX : y\r\n\r\nhello", false },
		{ "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX: a\x01b\r\n\r\nhello", false },
		{ "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX: a\rb\r\n\r\nhello", false },
		{ "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n", false }, /* the head goes on */
		/* names http_parser 2.9 takes for a framing header they only begin with */
		{ "HTTP/1.1 200 OK\r\nContent-Length: 5\r\ntransfer-encodingx-: y\r\n\r\nhello", false },
		{ "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection-X: close\r\n\r\nhello", false },
		{ "HTTP/1.1 200 OK\r\n\r\n", false },
		{ "HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n", false },
		/* long values: checked eight bytes at a time, then byte by byte */
		{ "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Long: abcdefghij\tklmnopqrstuvwxyz\r\n\r\n", true },
		{ "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Long: abcdefghijklmnop\x7fqrstuvwxyz\r\n\r\n", false },
		{ "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Long: abcdefghijklmnop\x01qrstuvwxyz\r\n\r\n", false },
		{ "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Long: abcdefghijklmnop\nqrstuvwxyz\r\n\r\n", false },
	};

	expect_head_cases(cases, sizeof(cases) / sizeof(cases[0]), false);
}

static void request_head_fast_agrees_with_http_parser(void **state)
{
	(void)state;
	static const struct head_case cases[] = {
		{ "POST /v1/chat/completions HTTP/1.1\r\nHost: 10.0.0.1:8000\r\n"
		  "Content-Type: application/json\r\nAuthorization: Bearer sk-x\r\n"
		  "Content-Length: 2\r\n\r\n{}", true },
		{ "GET /health?x=1&y=%20 HTTP/1.1\r\nHost: a\r\n\r\n", true },
		{ "POST /v1/completions HTTP/1.1\r\nx-fairgate-tenant: beta\r\nContent-Length: 0\r\n\r\n", true },
		{ "PUT /x HTTP/1.1\r\nContent-Length: 0\r\n\r\n", false },
		{ "POST /x HTTP/1.0\r\nContent-Length: 0\r\n\r\n", false },
		{ "POST http://a/x HTTP/1.1\r\nContent-Length: 0\r\n\r\n", false },
		{ "POST /x#f HTTP/1.1\r\nContent-Length: 0\r\n\r\n", false },
		{ "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", false },
		{ "POST /x HTTP/1.1\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", false },
		{ "POST /x HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n", false },
		{ "POST /x HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}", false },
		{ "POST /x HTTP/1.1\r\nContent-Length: 2\r\nX:\r\n\r\n{}", false },
		{ "POST /x HTTP/1.1\r\nContent-Length: 2\r\n", false },
		{ "\r\nPOST /x HTTP/1.1\r\nContent-Length: 0\r\n\r\n", false },
		{ "POST  /x HTTP/1.1\r\nContent-Length: 0\r\n\r\n", false },
	};

	expect_head_cases(cases, sizeof(cases) / sizeof(cases[0]), true);
}

static void salts_are_stable_separate_and_valid(void **state)
{
	(void)state;
	struct fg_salt_secret k1 = { .len = 32 }, k2 = { .len = 32 };
	char a[FG_SALT_MAX + 1], a2[FG_SALT_MAX + 1], b[FG_SALT_MAX + 1], other[FG_SALT_MAX + 1];
	char odd[FG_SALT_MAX + 1];

	memset(k1.bytes, 1, 32);
	memset(k2.bytes, 2, 32);
	assert_int_equal(fg_salt_for_tenant(&k1, "acme", a), 0);
	assert_int_equal(fg_salt_for_tenant(&k1, "acme", a2), 0);
	assert_int_equal(fg_salt_for_tenant(&k1, "globex", b), 0);
	assert_int_equal(fg_salt_for_tenant(&k2, "acme", other), 0);
	assert_string_equal(a, a2);
	assert_string_not_equal(a, b);
	assert_string_not_equal(a, other);
	assert_int_equal(strncmp(a, "fg1-acme-", 9), 0);
	assert_int_equal(fg_salt_for_tenant(&k1, "a/b@c\\d-0123456789012345678901", odd), 0);
	assert_true(strlen(odd) <= 128);
	assert_null(strpbrk(odd, "@/\\"));
	assert_true(strlen(a) == 9 + 64);
}

static void api_keys_hash_with_sha256(void **state)
{
	(void)state;
	uint8_t h[32];
	char hex[65];

	/* printf %s 'sk-acme-demo' | sha256sum (examples/policy.yaml) */
	assert_int_equal(fg_sha256("sk-acme-demo", 12, h), 0);
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", h[i]);
	assert_string_equal(hex, "953d0ab8229abd463060e52204c8cb44e32297002500258c1181e18379c54626");
}

static void bearer_parsing(void **state)
{
	(void)state;
	size_t n;
	const char *t = fg_bearer_token("Bearer sk-1", 11, &n);
	assert_non_null(t);
	assert_int_equal(n, 4);
	assert_memory_equal(t, "sk-1", 4);
	t = fg_bearer_token("  bearer \t sk-2  ", 17, &n);
	assert_non_null(t);
	assert_memory_equal(t, "sk-2", n);
	assert_null(fg_bearer_token("Basic abc", 9, &n));
	assert_null(fg_bearer_token("Bearer", 6, &n));
	assert_null(fg_bearer_token("Bearer   ", 9, &n));
	assert_null(fg_bearer_token("Bearer a b", 10, &n));
	assert_null(fg_bearer_token("Bearersk-3", 10, &n));
}

static void trusted_sources(void **state)
{
	(void)state;
	struct fg_agent a = { .n_trusted_proxies = 2 };
	struct sockaddr_in in4 = { .sin_family = AF_INET };
	struct sockaddr_in6 in6 = { .sin6_family = AF_INET6 };

	a.trusted_proxies[0] = (struct fg_cidr){ .family = AF_INET, .prefixlen = 12, .addr = { 172, 16 } };
	a.trusted_proxies[1] = (struct fg_cidr){ .family = AF_INET6, .prefixlen = 32,
						 .addr = { 0xfd, 0x00, 0x00, 0x0a } };
	inet_pton(AF_INET, "172.31.255.1", &in4.sin_addr);
	assert_true(fg_source_trusted(&a, (struct sockaddr *)&in4));
	inet_pton(AF_INET, "172.32.0.1", &in4.sin_addr);
	assert_false(fg_source_trusted(&a, (struct sockaddr *)&in4));
	inet_pton(AF_INET6, "::ffff:172.20.1.1", &in6.sin6_addr); /* dual-stack listener */
	assert_true(fg_source_trusted(&a, (struct sockaddr *)&in6));
	inet_pton(AF_INET6, "fd00:a:1::5", &in6.sin6_addr);
	assert_true(fg_source_trusted(&a, (struct sockaddr *)&in6));
	inet_pton(AF_INET6, "fd00:b::5", &in6.sin6_addr);
	assert_false(fg_source_trusted(&a, (struct sockaddr *)&in6));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(chat_is_measured),
		cmocka_unit_test(completions_prompt_forms),
		cmocka_unit_test(bad_requests_name_the_parameter),
		cmocka_unit_test(valid_edges_are_accepted),
		cmocka_unit_test(forward_body_splices),
		cmocka_unit_test(sse_hides_forced_usage_chunk),
		cmocka_unit_test(sse_keeps_usage_when_asked),
		cmocka_unit_test(sse_crlf_and_garbage_pass_through),
		cmocka_unit_test(usage_reader_agrees_with_jansson),
		cmocka_unit_test(response_head_fast_agrees_with_http_parser),
		cmocka_unit_test(request_head_fast_agrees_with_http_parser),
		cmocka_unit_test(salts_are_stable_separate_and_valid),
		cmocka_unit_test(api_keys_hash_with_sha256),
		cmocka_unit_test(bearer_parsing),
		cmocka_unit_test(trusted_sources),
	};
	return cmocka_run_group_tests_name("proxy_http", tests, NULL, NULL);
}
