/* fuzz_request_json.c — libFuzzer target: the agent's OpenAI request body
 * handling (agent/http/http_request.c) — parse and validate, price, and build
 * the body forwarded to the engine — on arbitrary bytes.
 *
 * The first two input bytes pick the API and the rewrite (salt or none,
 * forced usage, priority, an output cap); the rest is the body. Invariants: a
 * refusal has a message and goes out as an OpenAI error (whatever bytes
 * the message quotes); the body read in pieces (fg_request_scan_*, cut
 * anywhere) and read in one get exactly the reference reader's answer
 * (yajl: fg_request_parse_reference); the tokenizer alone accepts the
 * JSON texts jansson accepts; the agent's streaming validator and a full jansson
 * parse (with duplicate keys refused) agree on which bodies are JSON
 * objects; an accepted body is priced with finite,
 * non-negative numbers; the forwarded body is one JSON object without
 * duplicate keys whose cache_salt is exactly the injected one (or absent),
 * whose priority is the tier's (or absent: a client's never passes), with
 * stream_options.include_usage and .continuous_usage_stats true when
 * forced (a client's "stream_options": null then becomes an object of
 * those two), the output cap written once under each name its API reads,
 * and every other member the client sent unchanged. A /tokenize body, when
 * the shape has one, is a JSON object. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "agent/http/http_errors.h"
#include "agent/http/http_request.h"
#include "lib/json_tok.h"
#include "policy/cost_model.h"
#include "policy/policy.h"
#include "policy/pricing.h"
#include "selftests/common/request_scan_diff.h"
#include "selftests/fuzz/fuzz_common.h"

static const char *const salts[] = {
	"fg1-acme-3f9c2d1e0b7a6958", /* the shape agent/proxy/salt.c makes */
	"s",
};

static struct fg_cost_model cm;
static struct fg_calibration cal;
static struct fg_policy pol;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fg_policy_defaults(&pol);
	pol.replica.model.image_tokens = 576;
	fg_cost_model_init(&cm, &pol.replica);
	fg_calibration_init(&cal);
	return 0;
}

static void check_price(const struct fg_req_info *info)
{
	struct fg_prompt_est est = fg_estimate_prompt(&pol.replica.model,
						      fg_chars_per_token(&cal, 1, 4.0), &info->shape);
	FUZZ_CHECK(est.tokens_safe >= est.tokens && est.tokens_max >= est.tokens_safe - 1e-9 &&
			   est.longest_max >= est.longest_safe - 1e-9,
		   "estimates out of order: %g %g %g", est.tokens, est.tokens_safe, est.tokens_max);
	for (int mode = FG_METER_REPLICA_TIME; mode <= FG_METER_REQUESTS; mode++) {
		struct fg_price pr = fg_price_request(&cm, (enum fg_metering)mode, &est, &info->shape,
						      256, 32768);
		FUZZ_CHECK(isfinite(pr.units) && pr.units >= 0, "units %g (mode %d)", pr.units, mode);
		FUZZ_CHECK(isfinite(pr.prompt_tokens) && pr.prompt_tokens >= 0, "prompt %g",
			   pr.prompt_tokens);
		FUZZ_CHECK(isfinite(pr.output_tokens) && pr.output_tokens >= 0, "output %g",
			   pr.output_tokens);
	}
}

/* The 400 the proxy writes for it: an HTTP response whose body is
 * {"error":{"message":...}}. */
static void check_refusal(const char *msg, const char *param)
{
	struct fg_buf b = { 0 };

	FUZZ_CHECK(!fg_http_error(&b, 400, "invalid_request_error", NULL, param, msg, NULL, false),
		   "no error response for: %s", msg);
	const char *body = memmem(fg_buf_head(&b), fg_buf_used(&b), "\r\n\r\n", 4);
	FUZZ_CHECK(body, "error response without a body");
	body += 4;
	json_t *e = json_loadb(body, fg_buf_used(&b) - (size_t)(body - fg_buf_head(&b)), 0, NULL);
	FUZZ_CHECK(json_is_string(json_object_get(json_object_get(e, "error"), "message")),
		   "error body is not OpenAI-shaped");
	json_decref(e);
	fg_buf_free(&b);
}

static bool cap_name(const struct fg_req_info *info, const char *k)
{
	if (info->api == FG_API_RESPONSES)
		return !strcmp(k, "max_output_tokens");
	return !strcmp(k, "max_tokens") ||
	       (info->api == FG_API_CHAT && !strcmp(k, "max_completion_tokens"));
}

/* Every member of the client's object except those the rewrite owns. */
static void check_members_kept(const struct fg_req_info *info, const json_t *in,
			       const json_t *out, const struct fg_rewrite *rw)
{
	bool forced_usage = rw->force_usage;
	const char *k;
	json_t *v;

	json_object_foreach((json_t *)in, k, v) {
		if (!strcmp(k, "cache_salt") || !strcmp(k, "priority"))
			continue;
		if (rw->max_tokens && cap_name(info, k))
			continue;
		const json_t *o = json_object_get(out, k);
		FUZZ_CHECK(o, "member '%s' lost", k);
		/* "stream_options": null says nothing: forced, it becomes the
		 * object that carries include_usage, as if it were absent */
		if (forced_usage && !strcmp(k, "stream_options") && json_is_null(v)) {
			FUZZ_CHECK(json_is_object(o) && json_object_size(o) == 2,
				   "stream_options: null not replaced by the forced usage options");
			continue;
		}
		if (forced_usage && !strcmp(k, "stream_options") && json_is_object(v)) {
			const char *k2;
			json_t *v2;
			json_object_foreach(v, k2, v2)
				if (strcmp(k2, "include_usage") && strcmp(k2, "continuous_usage_stats"))
					FUZZ_CHECK(json_equal(v2, json_object_get(o, k2)),
						   "stream_options.%s changed", k2);
			continue;
		}
		FUZZ_CHECK(json_equal(v, o), "member '%s' changed", k);
	}
}

static void check_forward(const struct fg_req_info *info, const json_t *client, const char *fwd,
			  size_t fwd_len, const struct fg_rewrite *rw)
{
	json_error_t jerr;
	json_t *out = json_loadb(fwd, fwd_len, JSON_REJECT_DUPLICATES, &jerr);

	FUZZ_CHECK(out, "forwarded body is not JSON: %s at %d:%d: %.*s", jerr.text, jerr.line,
		   jerr.column, (int)(fwd_len < 400 ? fwd_len : 400), fwd);
	FUZZ_CHECK(json_is_object(out), "forwarded body is not an object");
	FUZZ_CHECK(strlen(fwd) == fwd_len, "forwarded length %zu, string %zu", fwd_len, strlen(fwd));

	const json_t *salt = json_object_get(out, "cache_salt");
	if (rw->cache_salt)
		FUZZ_CHECK(json_is_string(salt) && !strcmp(json_string_value(salt), rw->cache_salt),
			   "cache_salt is not the injected one");
	else
		FUZZ_CHECK(!salt, "a client cache_salt reached the engine");

	const json_t *prio = json_object_get(out, "priority");
	if (rw->set_priority)
		FUZZ_CHECK(json_is_integer(prio) && json_integer_value(prio) == rw->priority,
			   "priority is not the tier's");
	else
		FUZZ_CHECK(!prio, "a client priority reached the engine");

	if (rw->force_usage) {
		const json_t *iu = json_object_get(json_object_get(out, "stream_options"),
						   "include_usage");
		const json_t *cus = json_object_get(json_object_get(out, "stream_options"),
						    "continuous_usage_stats");
		FUZZ_CHECK(json_is_true(iu), "include_usage not forced on");
		FUZZ_CHECK(json_is_true(cus), "continuous_usage_stats not forced on");
	}
	if (rw->max_tokens) {
		const char *names[] = { "max_tokens", "max_completion_tokens", "max_output_tokens" };
		for (int i = 0; i < 3; i++)
			if (cap_name(info, names[i]))
				FUZZ_CHECK(json_integer_value(json_object_get(out, names[i])) ==
						   (json_int_t)rw->max_tokens,
					   "%s is not the reserved cap", names[i]);
	}
	check_members_kept(info, client, out, rw);
	json_decref(out);
}

static int count_token(void *ctx, const char *text, const struct fg_jt_token *t)
{
	(void)ctx, (void)text, (void)t;
	return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const enum fg_api apis[] = { FG_API_CHAT, FG_API_COMPLETIONS, FG_API_EMBEDDINGS,
					    FG_API_RESPONSES, FG_API_TOKENIZE, FG_API_DETOKENIZE,
					    FG_API_PASSTHROUGH, FG_API_CHAT };
	uint8_t opt = fuzz_take_byte(&data, &size), opt2 = fuzz_take_byte(&data, &size);
	enum fg_api api = apis[opt & 7];
	struct fg_rewrite rw = {
		.cache_salt = opt & 8 ? NULL : salts[(opt >> 4) & 1],
		/* as the proxy forces it: only where the parse tracks stream_options */
		.force_usage = (opt & 32) && fg_api_streams_usage(api),
		.set_priority = opt & 64,
		.priority = opt & 128 ? -7 : 3,
		/* the proxy writes a cap only for the APIs that generate */
		.max_tokens = api == FG_API_CHAT || api == FG_API_COMPLETIONS || api == FG_API_RESPONSES
				      ? opt2 : 0,
	};
	struct fg_req_info info;
	char msg[384];
	static const char unset[] = "unset";
	const char *param = unset;
	/* a private copy: the parser must not read past `size` */
	char *body = malloc(size ? size : 1);

	memcpy(body, data, size);
	int rc = fg_request_parse(api, body, size, &info, msg, sizeof(msg), &param);
	/* the same bytes read in pieces, as the proxy reads a body: the same answer */
	char why[1024];
	FUZZ_CHECK(scan_diff(api, body, size, 64, 2, ((uint64_t)opt2 << 8 | opt) + size, why,
			     sizeof(why)),
		   "the body read in pieces differs from one read: %s", why);
	/* the tokenizer alone (lib/json_tok.c) accepts exactly the JSON texts
	 * jansson does, but for the rules the reader adds (numbers' range,
	 * depth); jansson takes a NUL byte for the end of the text */
	if (!memchr(body, 0, size)) {
		json_error_t jerr;
		json_t *any = json_loadb(body, size, JSON_DECODE_ANY, &jerr);
		struct fg_jt jt;
		fg_jt_init(&jt);
		enum fg_jt_status st = fg_jt_feed(&jt, body, size, count_token, NULL);
		if (st == FG_JT_MORE)
			st = fg_jt_finish(&jt, body, size, count_token, NULL);
		FUZZ_CHECK(!any || st == FG_JT_DONE, "jansson accepts, the tokenizer refuses at %zu",
			   jt.err_at);
		FUZZ_CHECK(any || st != FG_JT_DONE || strstr(jerr.text, "too big") ||
				   strstr(jerr.text, "overflow") || strstr(jerr.text, "depth"),
			   "the tokenizer accepts, jansson refuses: %s", jerr.text);
		json_decref(any);
	}
	/* the oracle: one definition of a valid body, jansson's tree */
	json_t *client = json_loadb(body, size, JSON_REJECT_DUPLICATES, NULL);
	if (client && json_is_object(client) && !memchr(body, 0, size))
		FUZZ_CHECK(rc == 0 || !strstr(msg, "not valid JSON"),
			   "a JSON object refused as invalid: %s", msg);
	if (rc) {
		FUZZ_CHECK(memchr(msg, 0, sizeof(msg)) && msg[0], "refusal without a message");
		FUZZ_CHECK(param != unset, "param not set on refusal");
		check_refusal(msg, param);
		json_decref(client);
		free(body);
		return 0;
	}
	FUZZ_CHECK(json_is_object(client), "accepted what is not a JSON object (without duplicate keys)");
	FUZZ_CHECK(memchr(info.model, 0, sizeof(info.model)), "model not terminated");
	FUZZ_CHECK(info.shape.n <= 128, "n %u", info.shape.n);
	if (api == FG_API_CHAT || api == FG_API_COMPLETIONS || api == FG_API_RESPONSES)
		FUZZ_CHECK(info.shape.n >= 1, "n %u", info.shape.n);
	check_price(&info);

	size_t fwd_len = 0;
	char *fwd = fg_request_forward_body(&info, body, size, &rw, &fwd_len);
	if (fwd && client)
		check_forward(&info, client, fwd, fwd_len, &rw);
	free(fwd);
	char *tok = fg_tokenize_body(&info, body, size, &fwd_len);
	if (tok) {
		json_t *t = json_loadb(tok, fwd_len, 0, NULL);
		FUZZ_CHECK(json_is_object(t), "the /tokenize body is not a JSON object: %.*s",
			   (int)(fwd_len < 300 ? fwd_len : 300), tok);
		json_decref(t);
	}
	free(tok);
	json_decref(client);
	free(body);
	return 0;
}
