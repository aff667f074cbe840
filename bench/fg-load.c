/* fg-load.c — fairgate's HTTP load generator for OpenAI-style endpoints.
 *
 * One epoll thread drives keep-alive HTTP/1.1 connections per tenant, each
 * carrying one request at a time. Open loop (default): each tenant emits
 * requests at its RATE on a fixed (or Poisson) schedule, and latency is
 * measured from the scheduled send time, so a slow server cannot hide its
 * queueing by slowing the client down (no coordinated omission). Closed
 * loop (--closed): every connection sends its next request as soon as the
 * previous one finishes. Responses are parsed with libhttp-parser (chunked
 * bodies, keep-alive), JSON usage with jansson, streams as SSE.
 *
 * Prints one JSON document: per tenant, requests sent and completed,
 * status-code counts, transport errors, latency and TTFT percentiles,
 * tokens, and Retry-After seen. See --help.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <http_parser.h>
#include <jansson.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/event_loop.h"
#include "sim/sim_cli.h"

#define MAX_TENANTS 64
#define MAX_HEADERS 16
#define NS 1000000000.0

static void usage(FILE *out)
{
	fprintf(out,
"usage: fg-load --target ADDR:PORT --tenant SPEC [--tenant SPEC ...] [options]\n"
"\n"
"Sends OpenAI chat (or completions) requests over keep-alive HTTP/1.1\n"
"connections and prints per-tenant JSON results on stdout.\n"
"\n"
"  --target ADDR:PORT     server to load (numeric IPv4, or [IPv6]:PORT)\n"
"  --tenant NAME:KEY:RATE:PROMPT_CHARS:MAX_TOKENS[:stream]\n"
"                         one tenant (repeatable, up to %d). KEY is sent as\n"
"                         'Authorization: Bearer KEY' (empty KEY = no header).\n"
"                         RATE is requests/s (open loop; ignored with --closed).\n"
"                         PROMPT_CHARS is the user message length in bytes;\n"
"                         MAX_TOKENS goes to max_tokens; ':stream' asks for SSE\n"
"  --connections N        connections per tenant, the cap on its requests in\n"
"                         flight (default 8); open loop queues the excess and\n"
"                         counts its wait in latency\n"
"  --closed               closed loop: each connection sends again as soon as\n"
"                         its response ends\n"
"  --requests N           stop after N requests per tenant\n"
"  --duration S           stop sending after S seconds (default 10 unless\n"
"                         --requests is given)\n"
"  --drain S              then wait up to S s for responses in flight (default 30)\n"
"  --timeout S            per-request timeout (default 60)\n"
"  --poisson              exponential inter-arrival times (default: even spacing)\n"
"  --path PATH            /v1/chat/completions (default) or /v1/completions\n"
"  --model NAME           the request's model field (default: omitted)\n"
"  --prefix-chars N       every prompt of a tenant starts with the same N bytes\n"
"                         (exercises the prefix cache); the rest is unique\n"
"  --no-usage             streams without stream_options.include_usage\n"
"  --header 'K: V'        extra request header (repeatable)\n"
"  --seed N               prompt text and Poisson arrivals (default 1)\n"
"  --honor-retry-after    a request answered 429 with retry-after-ms (or\n"
"                         Retry-After) is sent again on its connection after\n"
"                         that long, as an SDK that honours it would; the\n"
"                         retry does not count against --requests\n"
"  -h, --help\n"
"\n"
"Output (one JSON object): {\"duration_s\", \"connections_opened\", \"tenants\": [{\n"
"  \"name\", \"sent\", \"completed\", \"status\": {\"200\": n, \"429\": n, ...},\n"
"  \"errors\": {\"connect\", \"reset\", \"timeout\", \"bad_response\"},\n"
"  \"backlog_dropped\", \"latency_ms\": {\"p50\",\"p90\",\"p99\",\"max\",\"mean\"} (2xx),\n"
"  \"ttft_ms\": {...} (2xx streams), \"itl_ms\": {...} (2xx streams: the gap\n"
"  between consecutive content events of a stream as this client reads them,\n"
"  the inter-token time a user sees), \"prompt_tokens\", \"completion_tokens\",\n"
"  \"cached_tokens\", \"tokens_received\", \"sim_replica_ms\" (fairgate-sim's\n"
"  true replica time of the 2xx answers), \"sim_replica_ms_by_s\" (the same\n"
"  by the second since the start in which each answer ended, so a window of\n"
"  a run can be scored without its start or its drain), \"retry_after_seen\",\n"
"  \"retry_after_max_s\", \"retry_after_ms\": {...} (every Retry-After seen),\n"
"  \"retries\", \"retries_refused\", \"retry_peak_per_100ms\" (--honor-retry-after:\n"
"  requests sent after a rest, those answered 429 again, the most of them sent\n"
"  in one 100 ms interval), \"achieved_rps\"}]}\n"
"Percentiles are {\"min\",\"p10\",\"p50\",\"p90\",\"p99\",\"max\",\"mean\"}.\n"
"Every sent request ends as exactly one status count or one error.\n"
"Exit status: 0, or 1 if any request failed at the transport level.\n",
		MAX_TENANTS);
}

/* ---- configuration ---------------------------------------------------------- */

struct samples {
	double *v;
	size_t n, cap;
};

struct tenant {
	char name[64];
	char key[256];
	double rate;
	uint32_t prompt_chars, max_tokens;
	bool stream;
	/* schedule */
	double next_send;           /* real seconds since start */
	uint64_t timer;
	double *backlog;            /* intended send times waiting for a connection */
	size_t backlog_len, backlog_cap;
	uint64_t scheduled, backlog_dropped;
	/* results */
	uint64_t sent, completed, status[600], other_status;
	uint64_t err_connect, err_reset, err_timeout, err_bad;
	uint64_t prompt_tokens, completion_tokens, cached_tokens, tokens_received;
	double sim_replica_ms; /* fairgate-sim's true replica time of its 2xx answers */
	double *replica_by_s;       /* the same by the second each answer ended in */
	size_t n_replica_by_s;
	uint64_t retry_after_seen;
	double retry_after_max;
	struct samples latency, ttft, retry_after;
	struct samples itl;         /* gaps between a stream's content events */
	uint64_t retries, retries_refused;
	uint32_t *retry_bins;       /* rested requests sent per 100 ms since start */
	size_t n_retry_bins;
	char *prefix;
};

static struct {
	struct sockaddr_storage addr;
	socklen_t addrlen;
	char host_header[128];
	struct tenant tenants[MAX_TENANTS];
	uint32_t n_tenants;
	uint32_t connections;
	bool closed_loop, poisson, usage_in_streams, honor_retry_after;
	uint64_t requests;
	double duration, drain, timeout;
	const char *path, *model;
	char *extra_headers;
	uint32_t prefix_chars;
	uint64_t seed;
} cfg = { .connections = 8, .drain = 30, .timeout = 60, .path = "/v1/chat/completions",
	  .usage_in_streams = true, .seed = 1 };

/* ---- state ------------------------------------------------------------------ */

enum conn_state { C_IDLE, C_CONNECTING, C_BUSY };

struct conn {
	struct tenant *t;
	int fd;
	enum conn_state state;
	http_parser parser;
	char *out;
	size_t out_len, out_off;
	/* the request in flight */
	double intended, started;   /* seconds since start */
	double first_token;
	double last_token;          /* the latest content event of the stream */
	bool in_flight;
	bool complete;
	int status;
	char hfield[32];
	bool hvalue_last;
	size_t hfield_len;
	char hvalue[64];
	size_t hvalue_len;
	double retry_after;
	double rest_until;          /* --honor-retry-after: no request before this */
	uint64_t rest_timer;
	bool owes_retry;            /* answered 429: sent again once rested */
	bool is_retry;              /* the request in flight is such a retry */
	char *body;
	size_t body_len, body_cap;
	size_t sse_off;             /* parsed up to here in body (streams) */
	uint64_t chunks;
	double sim_replica_ms; /* x-sim-replica-ms, or the stream's `: x-sim` comment */
	json_t *usage;
};

static struct fg_loop *loop;
static struct conn *conns;
static uint32_t n_conns;
static uint64_t t0_ns;
static uint64_t connections_opened;
static bool stopping;           /* no new requests */
static uint64_t rng_state;

static double now_s(void)
{
	return (double)(fg_now_ns() - t0_ns) / NS;
}

static double rng_uniform(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return ((rng_state >> 11) + 0.5) / 9007199254740992.0;
}

static void samples_add(struct samples *s, double v)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 1024;
		double *p = realloc(s->v, cap * sizeof(*p));
		if (!p)
			return;
		s->v = p;
		s->cap = cap;
	}
	s->v[s->n++] = v;
}

/* ---- requests ------------------------------------------------------------------ */

static void fill_text(char *dst, size_t len, uint64_t seed)
{
	static const char letters[] = "abcdefghijklmnopqrstuvwxyz";
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		dst[i] = (i % 6 == 5) ? ' ' : letters[x % 26];
	}
}

/* The request for tenant t's k-th request: a unique prompt after the
 * tenant's shared prefix. */
static char *build_request(struct tenant *t, uint64_t k, size_t *len)
{
	size_t plen = t->prompt_chars;
	size_t pre = cfg.prefix_chars < plen ? cfg.prefix_chars : plen;
	char *prompt = malloc(plen + 1);
	char *body = NULL, *req = NULL;
	bool chat = strstr(cfg.path, "chat") != NULL;

	if (!prompt)
		return NULL;
	memcpy(prompt, t->prefix, pre);
	int tag = snprintf(prompt + pre, plen - pre + 1, "%s %llu ", t->name,
			   (unsigned long long)k);
	size_t used = pre + (tag > 0 ? (size_t)tag : 0);
	if (used < plen)
		fill_text(prompt + used, plen - used, cfg.seed * 1000003u + k * 7919u +
						      (uint64_t)(t - cfg.tenants));
	prompt[plen] = '\0';

	json_t *o = json_object();
	if (cfg.model)
		json_object_set_new(o, "model", json_string(cfg.model));
	if (chat)
		json_object_set_new(o, "messages",
				    json_pack("[{s:s,s:s}]", "role", "user", "content", prompt));
	else
		json_object_set_new(o, "prompt", json_string(prompt));
	json_object_set_new(o, "max_tokens", json_integer(t->max_tokens));
	if (t->stream) {
		json_object_set_new(o, "stream", json_true());
		if (cfg.usage_in_streams)
			json_object_set_new(o, "stream_options",
					    json_pack("{s:b}", "include_usage", 1));
	}
	body = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	free(prompt);
	if (!body)
		return NULL;
	char auth[300] = "";
	if (t->key[0])
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s\r\n", t->key);
	int n = asprintf(&req,
			 "POST %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: fg-load\r\n"
			 "Content-Type: application/json\r\nContent-Length: %zu\r\n%s%s\r\n%s",
			 cfg.path, cfg.host_header, strlen(body), auth,
			 cfg.extra_headers ? cfg.extra_headers : "", body);
	free(body);
	if (n < 0)
		return NULL;
	*len = (size_t)n;
	return req;
}

/* ---- response parsing -------------------------------------------------------------- */

static void header_done(struct conn *c)
{
	c->hfield[c->hfield_len] = '\0';
	c->hvalue[c->hvalue_len] = '\0';
	if (!strcasecmp(c->hfield, "retry-after-ms"))
		c->retry_after = atof(c->hvalue) / 1000.0;
	else if (!strcasecmp(c->hfield, "retry-after") && c->retry_after < 0)
		c->retry_after = atof(c->hvalue);
	else if (!strcasecmp(c->hfield, "x-sim-replica-ms"))
		c->sim_replica_ms = atof(c->hvalue);
	c->hfield_len = c->hvalue_len = 0;
}

static int on_header_field(http_parser *p, const char *at, size_t len)
{
	struct conn *c = p->data;

	if (c->hvalue_last)
		header_done(c);
	c->hvalue_last = false;
	size_t room = sizeof(c->hfield) - 1 - c->hfield_len;
	len = len < room ? len : room;
	memcpy(c->hfield + c->hfield_len, at, len);
	c->hfield_len += len;
	return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t len)
{
	struct conn *c = p->data;

	c->hvalue_last = true;
	size_t room = sizeof(c->hvalue) - 1 - c->hvalue_len;
	len = len < room ? len : room;
	memcpy(c->hvalue + c->hvalue_len, at, len);
	c->hvalue_len += len;
	return 0;
}

static int on_headers_complete(http_parser *p)
{
	struct conn *c = p->data;

	if (c->hvalue_last)
		header_done(c);
	c->status = p->status_code;
	return 0;
}

/* SSE: handle every complete line in the body. */
static void parse_sse(struct conn *c)
{
	for (;;) {
		char *line = c->body + c->sse_off;
		char *nl = memchr(line, '\n', c->body_len - c->sse_off);
		if (!nl)
			return;
		c->sse_off = (size_t)(nl - c->body) + 1;
		if (!strncmp(line, ": x-sim ", 8)) {
			json_t *x = json_loadb(line + 8, (size_t)(nl - line - 8), 0, NULL);
			c->sim_replica_ms = json_number_value(json_object_get(x, "replica_ms"));
			json_decref(x);
			continue;
		}
		if (strncmp(line, "data: ", 6) != 0)
			continue;
		const char *data = line + 6;
		size_t dlen = (size_t)(nl - data);
		if (dlen >= 6 && !strncmp(data, "[DONE]", 6))
			continue;
		json_error_t je;
		json_t *j = json_loadb(data, dlen, 0, &je);
		if (!j)
			continue;
		json_t *u = json_object_get(j, "usage");
		if (json_is_object(u)) {
			json_decref(c->usage);
			c->usage = json_incref(u);
		}
		json_t *ch = json_array_get(json_object_get(j, "choices"), 0);
		json_t *delta = json_object_get(ch, "delta");
		const char *text = json_string_value(delta ? json_object_get(delta, "content")
							   : json_object_get(ch, "text"));
		if (text && *text) {
			double now = now_s();
			if (!c->chunks)
				c->first_token = now;
			else if (c->status / 100 == 2)
				samples_add(&c->t->itl, (now - c->last_token) * 1e3);
			c->last_token = now;
			c->chunks++;
		}
		json_decref(j);
	}
}

static int on_body(http_parser *p, const char *at, size_t len)
{
	struct conn *c = p->data;

	if (c->body_len + len + 1 > c->body_cap) {
		size_t cap = c->body_cap ? c->body_cap : 4096;
		while (cap < c->body_len + len + 1)
			cap *= 2;
		if (cap > (64u << 20))
			return -1;
		char *b = realloc(c->body, cap);
		if (!b)
			return -1;
		c->body = b;
		c->body_cap = cap;
	}
	memcpy(c->body + c->body_len, at, len);
	c->body_len += len;
	c->body[c->body_len] = '\0';
	if (c->t->stream && c->status / 100 == 2)
		parse_sse(c);
	return 0;
}

static int on_message_complete(http_parser *p)
{
	struct conn *c = p->data;

	c->complete = true;
	http_parser_pause(p, 1);
	return 0;
}

static http_parser_settings settings = {
	.on_header_field = on_header_field,
	.on_header_value = on_header_value,
	.on_headers_complete = on_headers_complete,
	.on_body = on_body,
	.on_message_complete = on_message_complete,
};

/* ---- connections ----------------------------------------------------------------- */

static void conn_event(struct fg_loop *l, int fd, uint32_t events, void *ctx);
static void dispatch(struct tenant *t);
static void count_retry(struct conn *c);

static void conn_reset_fd(struct conn *c)
{
	if (c->fd >= 0) {
		fg_loop_del(loop, c->fd);
		close(c->fd);
	}
	c->fd = -1;
	c->state = C_IDLE;
}

static void request_clear(struct conn *c)
{
	free(c->out);
	c->out = NULL;
	c->out_len = c->out_off = 0;
	c->body_len = c->sse_off = 0;
	c->chunks = 0;
	c->sim_replica_ms = 0;
	c->status = 0;
	c->retry_after = -1;
	c->first_token = -1;
	c->complete = false;
	c->in_flight = false;
	c->hfield_len = c->hvalue_len = 0;
	c->hvalue_last = false;
	json_decref(c->usage);
	c->usage = NULL;
}

static void account_usage(struct conn *c, json_t *usage)
{
	struct tenant *t = c->t;

	if (!json_is_object(usage))
		return;
	t->prompt_tokens += (uint64_t)json_integer_value(json_object_get(usage, "prompt_tokens"));
	t->completion_tokens +=
		(uint64_t)json_integer_value(json_object_get(usage, "completion_tokens"));
	t->cached_tokens += (uint64_t)json_integer_value(
		json_object_get(json_object_get(usage, "prompt_tokens_details"), "cached_tokens"));
}

/* An answer's true replica time into the second it ended in. */
static void count_replica(struct tenant *t, double end_s, double ms)
{
	size_t bin = end_s > 0 ? (size_t)end_s : 0;

	if (bin >= t->n_replica_by_s) {
		size_t n = bin + 64;
		double *b = realloc(t->replica_by_s, n * sizeof(*b));
		if (!b)
			return;
		memset(b + t->n_replica_by_s, 0, (n - t->n_replica_by_s) * sizeof(*b));
		t->replica_by_s = b;
		t->n_replica_by_s = n;
	}
	t->replica_by_s[bin] += ms;
}

/* The response is complete: record it. */
static void request_done(struct conn *c)
{
	struct tenant *t = c->t;
	double end = now_s();

	t->completed++;
	if (c->status >= 100 && c->status < 600)
		t->status[c->status]++;
	else
		t->other_status++;
	if (c->retry_after >= 0) {
		t->retry_after_seen++;
		if (c->retry_after > t->retry_after_max)
			t->retry_after_max = c->retry_after;
		samples_add(&t->retry_after, c->retry_after * 1e3);
	}
	if (c->is_retry && c->status == 429)
		t->retries_refused++;
	if (cfg.honor_retry_after && c->status == 429 && c->retry_after > 0) {
		c->rest_until = end + c->retry_after;
		c->owes_retry = true;
	}
	if (c->status / 100 == 2) {
		t->sim_replica_ms += c->sim_replica_ms;
		count_replica(t, end, c->sim_replica_ms);
		samples_add(&t->latency, (end - c->intended) * 1e3);
		if (t->stream) {
			if (c->first_token >= 0)
				samples_add(&t->ttft, (c->first_token - c->intended) * 1e3);
			t->tokens_received += c->chunks;
			account_usage(c, c->usage);
		} else {
			json_error_t je;
			json_t *j = c->body_len ? json_loadb(c->body, c->body_len, 0, &je) : NULL;
			json_t *u = json_object_get(j, "usage");
			account_usage(c, u);
			if (json_is_object(u))
				t->tokens_received += (uint64_t)json_integer_value(
					json_object_get(u, "completion_tokens"));
			json_decref(j);
		}
	}
}

static void request_failed(struct conn *c, uint64_t *counter)
{
	if (c->in_flight)
		(*counter)++;
	request_clear(c);
	conn_reset_fd(c);
}

static void conn_flush(struct conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
		if (n > 0) {
			c->out_off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			fg_loop_mod(loop, c->fd, EPOLLIN | EPOLLOUT);
			return;
		}
		request_failed(c, &c->t->err_reset);
		return;
	}
	fg_loop_mod(loop, c->fd, EPOLLIN);
}

static int conn_open(struct conn *c)
{
	int fd = socket(cfg.addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;

	if (fd < 0)
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&cfg.addr, cfg.addrlen) && errno != EINPROGRESS) {
		close(fd);
		return -1;
	}
	if (fg_loop_add(loop, fd, EPOLLIN | EPOLLOUT, conn_event, c)) {
		close(fd);
		return -1;
	}
	c->fd = fd;
	c->state = C_CONNECTING;
	connections_opened++;
	return 0;
}

/* Put request k of the tenant on connection c (idle, possibly unconnected). */
static void conn_send(struct conn *c, double intended)
{
	struct tenant *t = c->t;

	if (c->owes_retry)
		intended = c->intended; /* the same request: latency from its first try */
	request_clear(c);
	c->out = build_request(t, t->sent, &c->out_len);
	if (!c->out)
		return;
	t->sent++;
	count_retry(c);
	c->intended = intended;
	c->started = now_s();
	c->in_flight = true;
	http_parser_init(&c->parser, HTTP_RESPONSE);
	c->parser.data = c;
	if (c->fd < 0 && conn_open(c)) {
		request_failed(c, &t->err_connect);
		return;
	}
	c->state = c->state == C_CONNECTING ? C_CONNECTING : C_BUSY;
	if (c->state == C_BUSY)
		conn_flush(c);
}

static void conn_readable(struct conn *c)
{
	char buf[65536];

	for (;;) {
		ssize_t n = recv(c->fd, buf, sizeof(buf), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			/* EOF may legitimately end a response without a length */
			if (n == 0 && c->in_flight)
				http_parser_execute(&c->parser, &settings, NULL, 0);
			if (c->in_flight && c->complete) {
				request_done(c);
				request_clear(c);
				conn_reset_fd(c);
			} else {
				request_failed(c, &c->t->err_reset);
			}
			return;
		}
		if (!c->in_flight) {
			request_failed(c, &c->t->err_bad); /* unsolicited bytes: drop the conn */
			return;
		}
		size_t used = http_parser_execute(&c->parser, &settings, buf, (size_t)n);
		enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);
		if (e != HPE_OK && e != HPE_PAUSED) {
			request_failed(c, &c->t->err_bad);
			return;
		}
		if (c->complete) {
			bool keep = http_should_keep_alive(&c->parser) && used == (size_t)n;
			request_done(c);
			request_clear(c);
			if (!keep)
				conn_reset_fd(c);
			else
				c->state = C_IDLE;
			return;
		}
	}
}

static void conn_event(struct fg_loop *l, int fd, uint32_t events, void *ctx)
{
	struct conn *c = ctx;
	struct tenant *t = c->t;

	(void)l;
	(void)fd;
	if (c->state == C_CONNECTING) {
		int err = 0;
		socklen_t len = sizeof(err);
		getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
		if (err || (events & (EPOLLERR | EPOLLHUP))) {
			request_failed(c, &t->err_connect);
			dispatch(t);
			return;
		}
		c->state = C_BUSY;
		conn_flush(c);
		return;
	}
	if (events & EPOLLOUT)
		conn_flush(c);
	if (c->fd >= 0 && (events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
		conn_readable(c);
	if (c->state == C_IDLE)
		dispatch(t);
}

/* ---- scheduling --------------------------------------------------------------------- */

static bool tenant_may_send(const struct tenant *t)
{
	if (stopping)
		return false;
	if (cfg.requests && t->sent - t->retries >= cfg.requests)
		return false;
	return true;
}

static void rest_over(struct fg_loop *l, void *ctx)
{
	struct conn *c = ctx;

	(void)l;
	c->rest_timer = 0;
	dispatch(c->t);
}

/* An idle connection of t that is not resting after a 429: one that owes a
 * retry, else (with want_new) any. A resting one gets a timer that
 * dispatches again when its rest is over. */
static struct conn *idle_conn(struct tenant *t, bool want_new)
{
	double now = now_s();
	struct conn *fresh = NULL;

	for (uint32_t i = 0; i < n_conns; i++) {
		struct conn *c = &conns[i];
		if (c->t != t || c->state != C_IDLE || c->in_flight)
			continue;
		if (c->rest_until > now) {
			if (!c->rest_timer)
				c->rest_timer = fg_loop_timer(loop, (uint64_t)((c->rest_until - now) * NS) + 1,
							      rest_over, c);
			continue;
		}
		if (c->owes_retry)
			return c;
		if (want_new && !fresh)
			fresh = c;
	}
	return fresh;
}

static bool retries_owed(const struct tenant *t)
{
	for (uint32_t i = 0; i < n_conns; i++)
		if (conns[i].t == t && conns[i].owes_retry)
			return true;
	return false;
}

static void count_retry(struct conn *c)
{
	struct tenant *t = c->t;
	size_t bin = (size_t)(now_s() * 10);

	c->is_retry = c->owes_retry;
	c->owes_retry = false;
	c->rest_until = 0;
	if (!c->is_retry)
		return;
	t->retries++;
	if (bin >= t->n_retry_bins) {
		size_t n = bin + 64;
		uint32_t *b = realloc(t->retry_bins, n * sizeof(*b));
		if (!b)
			return;
		memset(b + t->n_retry_bins, 0, (n - t->n_retry_bins) * sizeof(*b));
		t->retry_bins = b;
		t->n_retry_bins = n;
	}
	t->retry_bins[bin]++;
}

/* Open loop: drain the backlog onto idle connections. Closed loop: keep
 * every idle connection busy. */
static void dispatch(struct tenant *t)
{
	struct conn *c;

	/* a send that fails at once (connect refused) ends this round, so a
	 * dead server costs a retry per event, not a busy loop */
	if (cfg.closed_loop) {
		while (!stopping && (c = idle_conn(t, tenant_may_send(t)))) {
			conn_send(c, now_s());
			if (!c->in_flight)
				return;
		}
		return;
	}
	while (!stopping && (c = idle_conn(t, false))) { /* retries first */
		conn_send(c, now_s());
		if (!c->in_flight)
			return;
	}
	while (t->backlog_len && tenant_may_send(t) && (c = idle_conn(t, true))) {
		double intended = t->backlog[0];
		memmove(t->backlog, t->backlog + 1, (t->backlog_len - 1) * sizeof(*t->backlog));
		t->backlog_len--;
		conn_send(c, intended);
		if (!c->in_flight)
			return;
	}
}

static void arrival_timer(struct fg_loop *l, void *ctx);

static void schedule_arrival(struct tenant *t)
{
	double delay = t->next_send - now_s();

	t->timer = fg_loop_timer(loop, delay > 0 ? (uint64_t)(delay * NS) : 0, arrival_timer, t);
}

static void arrival_timer(struct fg_loop *l, void *ctx)
{
	struct tenant *t = ctx;
	double now = now_s();

	(void)l;
	t->timer = 0;
	while (t->next_send <= now && tenant_may_send(t) &&
	       (!cfg.requests || t->scheduled < cfg.requests)) {
		if (t->backlog_len == t->backlog_cap) {
			size_t cap = t->backlog_cap ? t->backlog_cap * 2 : 256;
			double *b = realloc(t->backlog, cap * sizeof(*b));
			if (!b)
				break;
			t->backlog = b;
			t->backlog_cap = cap;
		}
		t->backlog[t->backlog_len++] = t->next_send;
		t->scheduled++;
		double gap = 1.0 / t->rate;
		if (cfg.poisson)
			gap = -log(rng_uniform()) / t->rate;
		t->next_send += gap;
	}
	dispatch(t);
	if (tenant_may_send(t) && (!cfg.requests || t->scheduled < cfg.requests))
		schedule_arrival(t);
}

static uint32_t in_flight(void)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < n_conns; i++)
		n += conns[i].in_flight;
	return n;
}

static bool all_scheduled(void)
{
	/* an answer still to come may be a 429 that owes a retry: with every
	 * request sent and none back yet, the run is not over (a loaded
	 * machine widened that window past a 10 ms tick: e2e_fq_retry's herd
	 * stopped after its first answers) */
	if (cfg.honor_retry_after && in_flight())
		return false;
	for (uint32_t i = 0; i < cfg.n_tenants; i++) {
		const struct tenant *t = &cfg.tenants[i];
		if (cfg.requests && t->sent - t->retries < cfg.requests &&
		    (cfg.closed_loop || t->backlog_len || t->scheduled < cfg.requests))
			return false;
		if (retries_owed(t))
			return false;
		if (!cfg.requests)
			return false;
	}
	return true;
}

static double stop_at, drain_until;

/* Every 10 ms: time limits, per-request timeouts, the end of the run. */
static void housekeeping(struct fg_loop *l, void *ctx)
{
	double now = now_s();

	(void)ctx;
	if (!stopping && ((cfg.duration > 0 && now >= stop_at) || all_scheduled())) {
		stopping = true;
		drain_until = now + cfg.drain;
		for (uint32_t i = 0; i < cfg.n_tenants; i++) {
			struct tenant *t = &cfg.tenants[i];
			t->backlog_dropped += t->backlog_len;
			t->backlog_len = 0;
			if (t->timer)
				fg_loop_timer_cancel(loop, t->timer);
			t->timer = 0;
		}
	}
	for (uint32_t i = 0; i < n_conns; i++) {
		struct conn *c = &conns[i];
		if (c->in_flight && (now - c->started > cfg.timeout ||
				     (stopping && now >= drain_until))) {
			request_failed(c, &c->t->err_timeout);
			if (!stopping)
				dispatch(c->t);
		}
	}
	if (stopping && !in_flight()) {
		fg_loop_stop(l);
		return;
	}
	fg_loop_timer(loop, 10000000, housekeeping, NULL);
}

/* ---- output ------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static json_t *percentiles(struct samples *s)
{
	if (!s->n)
		return json_null();
	qsort(s->v, s->n, sizeof(double), cmp_double);
	double sum = 0;
	for (size_t i = 0; i < s->n; i++)
		sum += s->v[i];
#define PCT(p) s->v[(size_t)fmin((double)s->n - 1, ceil((p) / 100.0 * (double)s->n) - 1)]
	return json_pack("{s:f,s:f,s:f,s:f,s:f,s:f,s:f}", "min", s->v[0], "p10", PCT(10), "p50",
			 PCT(50), "p90", PCT(90), "p99", PCT(99), "max", s->v[s->n - 1], "mean",
			 sum / (double)s->n);
#undef PCT
}

static void print_results(double elapsed)
{
	json_t *arr = json_array();

	for (uint32_t i = 0; i < cfg.n_tenants; i++) {
		struct tenant *t = &cfg.tenants[i];
		json_t *status = json_object();
		char code[16];
		for (int s = 0; s < 600; s++) {
			if (!t->status[s])
				continue;
			snprintf(code, sizeof(code), "%d", s);
			json_object_set_new(status, code, json_integer((json_int_t)t->status[s]));
		}
		if (t->other_status)
			json_object_set_new(status, "other", json_integer((json_int_t)t->other_status));
		json_t *o = json_pack(
			"{s:s,s:I,s:I,s:o,s:{s:I,s:I,s:I,s:I},s:I,s:o,s:o,s:I,s:I,s:I,s:I,s:I,s:f,s:f}",
			"name", t->name, "sent", (json_int_t)t->sent, "completed",
			(json_int_t)t->completed, "status", status, "errors", "connect",
			(json_int_t)t->err_connect, "reset", (json_int_t)t->err_reset, "timeout",
			(json_int_t)t->err_timeout, "bad_response", (json_int_t)t->err_bad,
			"backlog_dropped", (json_int_t)t->backlog_dropped, "latency_ms",
			percentiles(&t->latency), "ttft_ms", percentiles(&t->ttft), "prompt_tokens",
			(json_int_t)t->prompt_tokens, "completion_tokens",
			(json_int_t)t->completion_tokens, "cached_tokens", (json_int_t)t->cached_tokens,
			"tokens_received", (json_int_t)t->tokens_received, "retry_after_seen",
			(json_int_t)t->retry_after_seen, "retry_after_max_s", t->retry_after_max,
			"achieved_rps", elapsed > 0 ? (double)t->completed / elapsed : 0.0);
		uint32_t peak = 0;
		for (size_t b = 0; b < t->n_retry_bins; b++)
			peak = t->retry_bins[b] > peak ? t->retry_bins[b] : peak;
		json_object_set_new(o, "retry_after_ms", percentiles(&t->retry_after));
		json_object_set_new(o, "sim_replica_ms", json_real(t->sim_replica_ms));
		json_t *by_s = json_array();
		size_t last = t->n_replica_by_s;
		while (last && t->replica_by_s[last - 1] == 0)
			last--;
		for (size_t b = 0; b < last; b++)
			json_array_append_new(by_s, json_real(t->replica_by_s[b]));
		json_object_set_new(o, "sim_replica_ms_by_s", by_s);
		json_object_set_new(o, "itl_ms", percentiles(&t->itl));
		json_object_set_new(o, "retries", json_integer((json_int_t)t->retries));
		json_object_set_new(o, "retries_refused", json_integer((json_int_t)t->retries_refused));
		json_object_set_new(o, "retry_peak_per_100ms", json_integer((json_int_t)peak));
		json_array_append_new(arr, o);
	}
	json_t *root = json_pack("{s:f,s:I,s:o}", "duration_s", elapsed, "connections_opened",
				 (json_int_t)connections_opened, "tenants", arr);
	char *s = json_dumps(root, JSON_INDENT(2));
	if (s)
		printf("%s\n", s);
	free(s);
	json_decref(root);
}

/* ---- command line ------------------------------------------------------------------- */

static int parse_target(const char *arg)
{
	struct fg_hostport hp;
	char why[128];

	if (sim_cli_parse_addr(arg, false, &hp, why, sizeof(why))) {
		fprintf(stderr, "fg-load: --target %s: %s\n", arg, why);
		return -1;
	}
	if (fg_hostport_sockaddr(&hp, &cfg.addr, &cfg.addrlen))
		return -1;
	fg_hostport_format(&hp, cfg.host_header, sizeof(cfg.host_header));
	return 0;
}

/* NAME:KEY:RATE:PROMPT_CHARS:MAX_TOKENS[:stream] */
static int parse_tenant(const char *arg)
{
	char buf[512], *f[7];
	int n = 0;

	if (cfg.n_tenants >= MAX_TENANTS || strlen(arg) >= sizeof(buf))
		return -1;
	strcpy(buf, arg);
	char *rest = buf;
	while (rest && n < 7)
		f[n++] = strsep(&rest, ":");
	if (rest || n < 5 || n > 6)
		return -1;
	struct tenant *t = &cfg.tenants[cfg.n_tenants];
	char *end;
	if (!*f[0] || strlen(f[0]) >= sizeof(t->name) || strlen(f[1]) >= sizeof(t->key) ||
	    strpbrk(f[0], "\"\\ ") || strpbrk(f[1], "\r\n "))
		return -1;
	strcpy(t->name, f[0]);
	strcpy(t->key, f[1]);
	t->rate = strtod(f[2], &end);
	if (*end || !(t->rate >= 0) || !isfinite(t->rate))
		return -1;
	long pc = strtol(f[3], &end, 10);
	if (*end || pc < 1 || pc > (16 << 20))
		return -1;
	long mt = strtol(f[4], &end, 10);
	if (*end || mt < 1 || mt > (1 << 24))
		return -1;
	t->prompt_chars = (uint32_t)pc;
	t->max_tokens = (uint32_t)mt;
	if (n == 6) {
		if (strcmp(f[5], "stream"))
			return -1;
		t->stream = true;
	}
	cfg.n_tenants++;
	return 0;
}

static int add_header(const char *h)
{
	size_t old = cfg.extra_headers ? strlen(cfg.extra_headers) : 0;

	if (!strchr(h, ':') || strpbrk(h, "\r\n"))
		return -1;
	char *p = realloc(cfg.extra_headers, old + strlen(h) + 3);
	if (!p)
		return -1;
	strcpy(p + old, h);
	strcat(p + old, "\r\n");
	cfg.extra_headers = p;
	return 0;
}

static bool parse_double(const char *s, double lo, double *out)
{
	char *end;
	double v = strtod(s, &end);

	if (*end || end == s || !isfinite(v) || v < lo)
		return false;
	*out = v;
	return true;
}

int main(int argc, char **argv)
{
	enum { O_TARGET = 256, O_TENANT, O_CONNS, O_CLOSED, O_REQS, O_DUR, O_DRAIN, O_TIMEOUT,
	       O_POISSON, O_PATH, O_MODEL, O_PREFIX, O_NOUSAGE, O_HEADER, O_SEED, O_HONOR };
	static const struct option opts[] = {
		{ "target", required_argument, NULL, O_TARGET },
		{ "tenant", required_argument, NULL, O_TENANT },
		{ "connections", required_argument, NULL, O_CONNS },
		{ "closed", no_argument, NULL, O_CLOSED },
		{ "requests", required_argument, NULL, O_REQS },
		{ "duration", required_argument, NULL, O_DUR },
		{ "drain", required_argument, NULL, O_DRAIN },
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "poisson", no_argument, NULL, O_POISSON },
		{ "path", required_argument, NULL, O_PATH },
		{ "model", required_argument, NULL, O_MODEL },
		{ "prefix-chars", required_argument, NULL, O_PREFIX },
		{ "no-usage", no_argument, NULL, O_NOUSAGE },
		{ "header", required_argument, NULL, O_HEADER },
		{ "seed", required_argument, NULL, O_SEED },
		{ "honor-retry-after", no_argument, NULL, O_HONOR },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool have_target = false;
	double v;
	int opt;

	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case O_TARGET:
			if (parse_target(optarg))
				goto bad;
			have_target = true;
			break;
		case O_TENANT:
			if (parse_tenant(optarg))
				goto bad;
			break;
		case O_CONNS:
			if (!parse_double(optarg, 1, &v) || v > 65536 || v != floor(v))
				goto bad;
			cfg.connections = (uint32_t)v;
			break;
		case O_CLOSED: cfg.closed_loop = true; break;
		case O_REQS:
			if (!parse_double(optarg, 1, &v) || v != floor(v))
				goto bad;
			cfg.requests = (uint64_t)v;
			break;
		case O_DUR:
			if (!parse_double(optarg, 0, &cfg.duration))
				goto bad;
			break;
		case O_DRAIN:
			if (!parse_double(optarg, 0, &cfg.drain))
				goto bad;
			break;
		case O_TIMEOUT:
			if (!parse_double(optarg, 0.001, &cfg.timeout))
				goto bad;
			break;
		case O_POISSON: cfg.poisson = true; break;
		case O_PATH:
			if (optarg[0] != '/' || strpbrk(optarg, " \r\n"))
				goto bad;
			cfg.path = optarg;
			break;
		case O_MODEL: cfg.model = optarg; break;
		case O_PREFIX:
			if (!parse_double(optarg, 0, &v) || v > (16 << 20) || v != floor(v))
				goto bad;
			cfg.prefix_chars = (uint32_t)v;
			break;
		case O_NOUSAGE: cfg.usage_in_streams = false; break;
		case O_HONOR: cfg.honor_retry_after = true; break;
		case O_HEADER:
			if (add_header(optarg))
				goto bad;
			break;
		case O_SEED:
			if (!parse_double(optarg, 0, &v) || v != floor(v))
				goto bad;
			cfg.seed = (uint64_t)v;
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
		continue;
bad:
		fprintf(stderr, "fg-load: invalid --%s '%s' (see --help)\n", opts[opt - O_TARGET].name,
			optarg ? optarg : "");
		return 2;
	}
	if (!have_target || !cfg.n_tenants || optind < argc) {
		usage(stderr);
		return 2;
	}
	if (!cfg.requests && !cfg.duration)
		cfg.duration = 10;
	for (uint32_t i = 0; i < cfg.n_tenants; i++)
		if (!cfg.closed_loop && cfg.tenants[i].rate <= 0) {
			fprintf(stderr, "fg-load: tenant %s needs RATE > 0 in open loop (or --closed)\n",
				cfg.tenants[i].name);
			return 2;
		}
	sim_cli_raise_fd_limit();
	signal(SIGPIPE, SIG_IGN);
	rng_state = cfg.seed * 0x9e3779b97f4a7c15ull | 1;

	loop = fg_loop_new();
	n_conns = cfg.n_tenants * cfg.connections;
	conns = calloc(n_conns, sizeof(*conns));
	if (!loop || !conns) {
		fprintf(stderr, "fg-load: out of memory\n");
		return 1;
	}
	t0_ns = fg_now_ns();
	stop_at = cfg.duration;
	for (uint32_t i = 0; i < cfg.n_tenants; i++) {
		struct tenant *t = &cfg.tenants[i];
		t->prefix = malloc(cfg.prefix_chars + 1);
		if (!t->prefix)
			return 1;
		fill_text(t->prefix, cfg.prefix_chars, cfg.seed * 31 + i);
	}
	for (uint32_t i = 0; i < n_conns; i++) {
		conns[i].t = &cfg.tenants[i / cfg.connections];
		conns[i].fd = -1;
		conns[i].retry_after = -1;
	}
	for (uint32_t i = 0; i < cfg.n_tenants; i++) {
		if (cfg.closed_loop)
			dispatch(&cfg.tenants[i]);
		else
			schedule_arrival(&cfg.tenants[i]);
	}
	fg_loop_timer(loop, 10000000, housekeeping, NULL);
	fg_loop_run(loop);
	double elapsed = now_s();
	print_results(elapsed);

	int rc = 0;
	for (uint32_t i = 0; i < n_conns; i++) {
		request_clear(&conns[i]);
		conn_reset_fd(&conns[i]);
		free(conns[i].body);
	}
	for (uint32_t i = 0; i < cfg.n_tenants; i++) {
		struct tenant *t = &cfg.tenants[i];
		if (t->err_connect || t->err_reset || t->err_timeout || t->err_bad)
			rc = 1;
		free(t->latency.v);
		free(t->ttft.v);
		free(t->itl.v);
		free(t->retry_after.v);
		free(t->retry_bins);
		free(t->replica_by_s);
		free(t->backlog);
		free(t->prefix);
	}
	free(conns);
	free(cfg.extra_headers);
	fg_loop_free(loop);
	return rc;
}
