/* fg-fake-engine — a tiny OpenAI-compatible engine for the shapes
 * fairgate-sim does not produce (its tokenizer makes every text 4 bytes a
 * token, and it always honours max_tokens). Used by the metering e2e test.
 *
 *   fg-fake-engine --listen HOST:PORT [--log FILE] [--auth-log FILE] [--ignore-max-tokens N]
 *                  [--tokenize-delay-ms N] [--tokenize-status S] [--reset-after-answer]
 *
 * Its tokenizer compresses and expands as real ones do on unusual text: a
 * run of one repeated byte of length L is ceil(L / 16) tokens, a run of
 * digits is a token per digit, any other stretch ceil(bytes / 4); a chat
 * message adds 4 tokens, a request 3 (as fairgate-sim's template).
 * POST /v1/chat/completions (stream or not; include_usage and
 * continuous_usage_stats as vLLM sends them; output = max_tokens, or N with
 * --ignore-max-tokens, "an engine that ignores max_tokens"), POST /tokenize
 * (vLLM's answer; delayed or failing on request), POST /v1/embeddings,
 * POST /v1/audio/... (any body: {"ok": true}, for passthrough entries),
 * GET /health, /metrics, /v1/models, /version.
 * --reset-after-answer: each chat answer says keep-alive, then the
 * connection is reset (an engine dropping a pooled connection unannounced).
 * --log appends one line per request: "METHOD PATH BODY" as received;
 * --auth-log one line per request: "METHOD PATH AUTHORIZATION" ("-" when the
 * request had none), to see what credentials reach the engine. */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "lib/event_loop.h"
#include "sim/sim_http.h"

static struct {
	FILE *log;
	FILE *auth_log;
	long ignore_max_tokens;     /* > 0: generate this many whatever max_tokens says */
	bool reset_after_answer;    /* each chat answer, then a reset (sim_http_reset_after) */
	long tokenize_delay_ms;
	int tokenize_status;
	struct fg_loop *loop;
} opt = { .tokenize_status = 200 };

static bool is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

static uint64_t text_tokens(const char *s, size_t n)
{
	uint64_t tokens = 0;
	size_t i = 0, plain = 0;

	while (i < n) {
		size_t j = i + 1;
		while (j < n && s[j] == s[i])
			j++;
		if (j - i >= 16) { /* a run: compressed */
			tokens += (plain + 3) / 4 + (j - i + 15) / 16;
			plain = 0;
			i = j;
			continue;
		}
		if (is_digit((unsigned char)s[i])) { /* digits: one each */
			tokens += (plain + 3) / 4;
			plain = 0;
			for (j = i; j < n && is_digit((unsigned char)s[j]); j++)
				tokens++;
			i = j;
			continue;
		}
		plain++;
		i++;
	}
	return tokens + (plain + 3) / 4;
}

static uint64_t content_tokens(const json_t *content)
{
	if (json_is_string(content))
		return text_tokens(json_string_value(content), json_string_length(content));
	uint64_t t = 0;
	size_t k;
	const json_t *part;
	json_array_foreach(content, k, part) {
		const json_t *text = json_object_get(part, "text");
		if (json_is_string(text))
			t += text_tokens(json_string_value(text), json_string_length(text));
	}
	return t;
}

/* The prompt as this engine's template counts it; -1 for a body it refuses. */
static int64_t prompt_tokens(const json_t *body)
{
	const json_t *messages = json_object_get(body, "messages");
	const json_t *prompt = json_object_get(body, "prompt");
	size_t k;
	const json_t *m;

	if (json_is_string(prompt))
		return (int64_t)text_tokens(json_string_value(prompt), json_string_length(prompt));
	if (!json_is_array(messages) || !json_array_size(messages))
		return -1;
	int64_t t = 3;
	json_array_foreach(messages, k, m)
		t += 4 + (int64_t)content_tokens(json_object_get(m, "content"));
	return t;
}

static void respond_json(struct sim_http_conn *c, int status, json_t *o)
{
	char *s = json_dumps(o, JSON_COMPACT);

	sim_http_respond(c, status, "application/json", "", s ? s : "{}", s ? strlen(s) : 2);
	free(s);
	json_decref(o);
}

static void error(struct sim_http_conn *c, int status, const char *msg)
{
	respond_json(c, status, json_pack("{s:{s:s, s:s, s:n, s:i}}", "error", "message", msg, "type",
					  "BadRequestError", "param", "code", status));
}

static json_t *usage(int64_t prompt, int64_t completion)
{
	return json_pack("{s:I, s:I, s:I}", "prompt_tokens", (json_int_t)prompt, "total_tokens",
			 (json_int_t)(prompt + completion), "completion_tokens", (json_int_t)completion);
}

static void chunk(struct sim_http_conn *c, const char *content, const char *role, bool finish,
		  json_t *u)
{
	json_t *delta = json_object();

	if (role)
		json_object_set_new(delta, "role", json_string(role));
	json_object_set_new(delta, "content", json_string(content));
	json_t *o = json_pack("{s:s, s:s, s:[{s:i, s:o, s:o}]}", "id", "fake-1", "object",
			      "chat.completion.chunk", "choices", "index", 0, "delta", delta,
			      "finish_reason", finish ? json_string("length") : json_null());
	if (u)
		json_object_set_new(o, "usage", u);
	char *s = json_dumps(o, JSON_COMPACT);
	char *line = NULL;
	if (s && asprintf(&line, "data: %s\n\n", s) > 0)
		sim_http_stream_chunk(c, line, strlen(line));
	free(line);
	free(s);
	json_decref(o);
}

static void chat(struct sim_http_conn *c, const json_t *body)
{
	int64_t prompt = prompt_tokens(body);
	json_int_t max = json_integer_value(json_object_get(body, "max_completion_tokens"));

	if (prompt < 0) {
		error(c, 400, "messages must be a non-empty array");
		return;
	}
	if (!max)
		max = json_integer_value(json_object_get(body, "max_tokens"));
	if (!max)
		max = 16;
	int64_t out = opt.ignore_max_tokens > 0 ? opt.ignore_max_tokens : (int64_t)max;
	if (!json_is_true(json_object_get(body, "stream"))) {
		json_t *text = json_string(" tok"); /* the text is not the point */
		respond_json(c, 200,
			     json_pack("{s:s, s:s, s:[{s:i, s:{s:s, s:o}, s:s}], s:o}", "id", "fake-1",
				       "object", "chat.completion", "choices", "index", 0, "message",
				       "role", "assistant", "content", text, "finish_reason", "length",
				       "usage", usage(prompt, out)));
		return;
	}
	const json_t *so = json_object_get(body, "stream_options");
	bool include = json_is_true(json_object_get(so, "include_usage"));
	bool continuous = include && json_is_true(json_object_get(so, "continuous_usage_stats"));
	sim_http_stream_begin(c, 200, "text/event-stream", "");
	chunk(c, "", "assistant", false, continuous ? usage(prompt, 0) : NULL);
	for (int64_t i = 1; i <= out; i++)
		chunk(c, " tok", NULL, i == out, continuous ? usage(prompt, i) : NULL);
	if (include) {
		json_t *o = json_pack("{s:s, s:s, s:[], s:o}", "id", "fake-1", "object",
				      "chat.completion.chunk", "choices", "usage", usage(prompt, out));
		char *s = json_dumps(o, JSON_COMPACT), *line = NULL;
		if (s && asprintf(&line, "data: %s\n\n", s) > 0)
			sim_http_stream_chunk(c, line, strlen(line));
		free(line);
		free(s);
		json_decref(o);
	}
	sim_http_stream_chunk(c, "data: [DONE]\n\n", 14);
	sim_http_stream_end(c);
}

struct delayed {
	struct sim_http_conn *c;
	int64_t count;
};

static void tokenize_answer(struct sim_http_conn *c, int64_t count)
{
	if (opt.tokenize_status != 200) {
		error(c, opt.tokenize_status, "the tokenizer failed (as asked)");
		return;
	}
	respond_json(c, 200, json_pack("{s:I, s:i, s:[], s:n}", "count", (json_int_t)count,
				       "max_model_len", 131072, "tokens", "token_strs"));
}

static void tokenize_due(struct fg_loop *loop, void *ctx)
{
	struct delayed *d = ctx;
	(void)loop;

	if (d->c) {
		sim_http_set_user(d->c, NULL);
		tokenize_answer(d->c, d->count);
	}
	free(d);
}

static void on_request(void *ctx, struct sim_http_conn *c, const struct sim_http_request *r)
{
	(void)ctx;
	if (opt.log) {
		fprintf(opt.log, "%s %s %.*s\n", r->method, r->path, (int)r->body_len,
			r->body ? r->body : "");
		fflush(opt.log);
	}
	if (opt.auth_log) {
		fprintf(opt.auth_log, "%s %s %s%s\n", r->method, r->path,
			r->authorization ? r->authorization : "-", r->cookie ? " +cookie" : "");
		fflush(opt.auth_log);
	}
	if (!strcmp(r->method, "GET") && (!strcmp(r->path, "/health") || !strcmp(r->path, "/metrics"))) {
		sim_http_respond(c, 200, "text/plain", "", "", 0);
		return;
	}
	if (!strcmp(r->method, "GET") && !strcmp(r->path, "/v1/models")) {
		respond_json(c, 200, json_pack("{s:s, s:[{s:s, s:i}]}", "object", "list", "data", "id",
					       "fake", "max_model_len", 131072));
		return;
	}
	if (!strcmp(r->method, "GET") && !strcmp(r->path, "/version")) {
		respond_json(c, 200, json_pack("{s:s}", "version", "fake"));
		return;
	}
	json_t *body = r->body_len ? json_loadb(r->body, r->body_len, 0, NULL) : NULL;
	if (!strcmp(r->method, "POST") && !strcmp(r->path, "/v1/chat/completions") && body) {
		if (opt.reset_after_answer)
			sim_http_reset_after(c);
		chat(c, body);
	} else if (!strcmp(r->method, "POST") && !strcmp(r->path, "/tokenize") && body) {
		int64_t count = prompt_tokens(body);
		if (count < 0) {
			error(c, 400, "no prompt or messages");
		} else if (opt.tokenize_delay_ms > 0) {
			struct delayed *d = calloc(1, sizeof(*d));
			d->c = c;
			d->count = count;
			sim_http_set_user(c, d);
			fg_loop_timer(opt.loop, (uint64_t)opt.tokenize_delay_ms * 1000000ull, tokenize_due,
				      d);
		} else {
			tokenize_answer(c, count);
		}
	} else if (!strcmp(r->method, "POST") && !strcmp(r->path, "/v1/embeddings") && body) {
		const json_t *in = json_object_get(body, "input");
		int64_t t = json_is_string(in) ? (int64_t)text_tokens(json_string_value(in),
								       json_string_length(in))
					       : prompt_tokens(body);
		respond_json(c, 200, json_pack("{s:s, s:[{s:s, s:i, s:[f]}], s:{s:I, s:I}}", "object",
					       "list", "data", "object", "embedding", "index", 0,
					       "embedding", 0.5, "usage", "prompt_tokens", (json_int_t)t,
					       "total_tokens", (json_int_t)t));
	} else if (!strcmp(r->method, "POST") && !strncmp(r->path, "/v1/audio/", 10)) {
		respond_json(c, 200, json_pack("{s:b}", "ok", 1));
	} else {
		error(c, 404, "not found");
	}
	json_decref(body);
}

static void on_close(void *ctx, struct sim_http_conn *c)
{
	struct delayed *d = sim_http_user(c);
	(void)ctx;

	if (d)
		d->c = NULL; /* its timer frees it */
}

static void on_signal(struct fg_loop *loop, int fd, uint32_t events, void *ctx)
{
	(void)fd, (void)events, (void)ctx;
	fg_loop_stop(loop);
}

int main(int argc, char **argv)
{
	char host[64] = "127.0.0.1", err[256];
	unsigned port = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--listen") && v && sscanf(v, "%63[^:]:%u", host, &port) == 2)
			i++;
		else if (!strcmp(a, "--log") && v && (opt.log = fopen(v, "a")))
			i++;
		else if (!strcmp(a, "--auth-log") && v && (opt.auth_log = fopen(v, "a")))
			i++;
		else if (!strcmp(a, "--ignore-max-tokens") && v)
			opt.ignore_max_tokens = atol(argv[++i]);
		else if (!strcmp(a, "--tokenize-delay-ms") && v)
			opt.tokenize_delay_ms = atol(argv[++i]);
		else if (!strcmp(a, "--tokenize-status") && v)
			opt.tokenize_status = atoi(argv[++i]);
		else if (!strcmp(a, "--reset-after-answer"))
			opt.reset_after_answer = true;
		else {
			fprintf(stderr, "usage: fg-fake-engine --listen HOST:PORT [--log FILE] [--auth-log FILE] "
					"[--ignore-max-tokens N] [--tokenize-delay-ms N] [--tokenize-status S] "
					"[--reset-after-answer]\n");
			return 2;
		}
	}
	if (!port || port > 65535) {
		fprintf(stderr, "fg-fake-engine: --listen HOST:PORT is required\n");
		return 2;
	}
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
	opt.loop = fg_loop_new();
	struct sim_http_callbacks cb = { .on_request = on_request, .on_close = on_close };
	struct sim_http_server *s =
		opt.loop ? sim_http_listen(opt.loop, host, (uint16_t)port, 64u << 20, &cb, NULL, err,
					   sizeof(err))
			 : NULL;
	if (!s || sfd < 0 || fg_loop_add(opt.loop, sfd, EPOLLIN, on_signal, NULL)) {
		fprintf(stderr, "fg-fake-engine: %s\n", s ? "cannot watch signals" : err);
		return 1;
	}
	fg_loop_run(opt.loop);
	sim_http_free(s);
	fg_loop_free(opt.loop);
	close(sfd);
	if (opt.log)
		fclose(opt.log);
	if (opt.auth_log)
		fclose(opt.auth_log);
	return 0;
}
