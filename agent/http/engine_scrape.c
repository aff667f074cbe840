/* engine_scrape.c — periodic GET /metrics from the engine; see the header. */
#include <errno.h>
#include <http_parser.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/http/engine_scrape.h"
#include "policy/policy_addr.h"

#define SCRAPE_MAX_BYTES (8u << 20)

struct fg_engine_scrape {
	struct fg_loop *loop;
	struct sockaddr_storage addr;
	socklen_t addr_len;
	uint64_t period_ns;
	uint64_t began_ns, asked_ns;
	fg_engine_scrape_cb cb;
	void *ctx;
	uint64_t timer;
	int fd;
	bool connected;
	size_t sent;
	http_parser parser;
	char *body;
	size_t body_len, body_cap;
	bool complete, overflow;
	uint64_t failures, successes;
	char request[FG_SCRAPE_REQUEST_MAX]; /* built by set_auth */
	size_t request_len;
};

static bool name_is(const char *p, size_t n, const char *name)
{
	return strlen(name) == n && !memcmp(p, name, n);
}

/* The cumulative figures calibration reads, each with the bit of
 * struct fg_engine_totals it fills (a pair's two halves must both be there). */
struct total_name {
	const char *name;
	size_t offset;
	unsigned bit;  /* FG_ET_* */
	unsigned half; /* 1 or 2 of a pair, 3 alone */
};

#define TOTAL(n, field, bit, half) { n, offsetof(struct fg_engine_totals, field), bit, half }
static const struct total_name total_names[] = {
	TOTAL("vllm:inter_token_latency_seconds_sum", itl_sum, FG_ET_ITL, 1),
	TOTAL("vllm:inter_token_latency_seconds_count", itl_count, FG_ET_ITL, 2),
	TOTAL("vllm:request_prefill_time_seconds_sum", prefill_sum, FG_ET_PREFILL, 1),
	TOTAL("vllm:request_prefill_time_seconds_count", prefill_count, FG_ET_PREFILL, 2),
	TOTAL("vllm:request_prompt_tokens_sum", prompt_len_sum, FG_ET_PROMPT_LEN, 1),
	TOTAL("vllm:request_prompt_tokens_count", prompt_len_count, FG_ET_PROMPT_LEN, 2),
	TOTAL("vllm:request_generation_tokens_sum", gen_len_sum, FG_ET_GEN_LEN, 1),
	TOTAL("vllm:request_generation_tokens_count", gen_len_count, FG_ET_GEN_LEN, 2),
	TOTAL("vllm:iteration_tokens_total_count", iterations, FG_ET_ITERATIONS, 3),
	TOTAL("vllm:prompt_tokens_total", prompt_tokens, FG_ET_TOKENS, 1),
	TOTAL("vllm:generation_tokens_total", generation_tokens, FG_ET_TOKENS, 2),
	TOTAL("vllm:prefix_cache_hits_total", cache_hits, FG_ET_CACHE, 1),
	TOTAL("vllm:prefix_cache_queries_total", cache_queries, FG_ET_CACHE, 2),
};
#define N_TOTALS (sizeof(total_names) / sizeof(*total_names))
#define N_PAIRS 8 /* distinct bits, FG_ET_ITL .. FG_ET_CACHE as 1 << 0 .. 6 */

static int bit_index(unsigned bit)
{
	int i = 0;

	while (bit > 1) {
		bit >>= 1;
		i++;
	}
	return i;
}

void fg_engine_metrics_parse(const char *text, size_t len, struct fg_engine_metrics *out)
{
	const char *p = text, *end = text + len;
	unsigned halves[N_PAIRS] = { 0 }, tpot = 0;
	double tpot_sum = 0, tpot_count = 0;

	memset(out, 0, sizeof(*out));
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		if (!eol)
			eol = end;
		const char *q = p;
		if (q < eol && *q != '#') {
			const char *name = q;
			while (q < eol && *q != '{' && *q != ' ')
				q++;
			size_t name_len = (size_t)(q - name);
			if (q < eol && *q == '{') { /* labels may hold spaces and braces in quotes */
				bool quoted = false;
				while (q < eol && (quoted || *q != '}')) {
					if (*q == '"' && q[-1] != '\\')
						quoted = !quoted;
					q++;
				}
				if (q < eol)
					q++;
			}
			while (q < eol && *q == ' ')
				q++;
			char num[64];
			size_t nl = (size_t)(eol - q);
			if (nl > 0 && nl < sizeof(num)) {
				memcpy(num, q, nl);
				num[nl] = 0;
				char *e;
				double v = strtod(num, &e);
				/* counts and a fraction: a negative or absurd sample is a
				 * broken exporter, and must not skew (or overflow) the sums */
				if (e != num && isfinite(v) && v >= 0 && v <= 1e15) {
					if (name_is(name, name_len, "vllm:num_requests_waiting")) {
						out->waiting += v;
						out->found |= 1;
					} else if (name_is(name, name_len, "vllm:num_requests_running")) {
						out->running += v;
						out->found |= 2;
					} else if (name_is(name, name_len, "vllm:num_preemptions_total")) {
						out->preemptions += v;
						out->found |= 4;
					} else if (name_is(name, name_len, "vllm:kv_cache_usage_perc")) {
						if (v > out->kv_usage)
							out->kv_usage = v;
						out->found |= 8;
					} else if (name_is(name, name_len,
							   "vllm:time_per_output_token_seconds_sum")) {
						tpot_sum += v;
						tpot |= 1;
					} else if (name_is(name, name_len,
							   "vllm:time_per_output_token_seconds_count")) {
						tpot_count += v;
						tpot |= 2;
					} else {
						for (size_t k = 0; k < N_TOTALS; k++) {
							const struct total_name *t = &total_names[k];
							if (!name_is(name, name_len, t->name))
								continue;
							*(double *)((char *)&out->totals + t->offset) += v;
							halves[bit_index(t->bit)] |= t->half;
							break;
						}
					}
				}
			}
		}
		p = eol + 1;
	}
	for (size_t k = 0; k < N_TOTALS; k++) {
		unsigned bit = total_names[k].bit;
		if (halves[bit_index(bit)] == 3)
			out->totals.have |= bit;
	}
	/* the deprecated name stands in only where the new one is missing
	 * (0.11 exports both, the same histogram) */
	if (!(out->totals.have & FG_ET_ITL) && tpot == 3) {
		out->totals.itl_sum = tpot_sum;
		out->totals.itl_count = tpot_count;
		out->totals.have |= FG_ET_ITL;
	}
	if (out->totals.have & FG_ET_ITL)
		out->found |= 16;
}

static void tick(struct fg_loop *loop, void *ctx);

static void close_conn(struct fg_engine_scrape *s)
{
	if (s->fd >= 0) {
		fg_loop_del(s->loop, s->fd);
		close(s->fd);
		s->fd = -1;
	}
	s->body_len = 0;
}

static void arm(struct fg_engine_scrape *s, uint64_t delay_ns)
{
	if (s->timer)
		fg_loop_timer_cancel(s->loop, s->timer);
	s->timer = fg_loop_timer(s->loop, delay_ns, tick, s);
}

/* The next scrape, a period after the last one began. */
static void arm_next(struct fg_engine_scrape *s)
{
	uint64_t now = fg_now_ns(), due = s->began_ns + s->period_ns;

	arm(s, due > now ? due - now : 0);
}

static void fail(struct fg_engine_scrape *s)
{
	s->failures++;
	close_conn(s);
	arm_next(s);
}

static int on_body(http_parser *p, const char *at, size_t len)
{
	struct fg_engine_scrape *s = p->data;

	if (s->body_len + len > SCRAPE_MAX_BYTES) {
		s->overflow = true;
		return -1;
	}
	if (s->body_len + len > s->body_cap) {
		size_t cap = s->body_cap ? s->body_cap : 65536;
		while (cap < s->body_len + len)
			cap *= 2;
		char *b = realloc(s->body, cap);
		if (!b)
			return -1;
		s->body = b;
		s->body_cap = cap;
	}
	memcpy(s->body + s->body_len, at, len);
	s->body_len += len;
	return 0;
}

static int on_complete(http_parser *p)
{
	((struct fg_engine_scrape *)p->data)->complete = true;
	return 0;
}

static const http_parser_settings settings = {
	.on_body = on_body,
	.on_message_complete = on_complete,
};

static void finish(struct fg_engine_scrape *s)
{
	if (s->complete && s->parser.status_code == 200) {
		struct fg_engine_metrics m;
		fg_engine_metrics_parse(s->body, s->body_len, &m);
		m.asked_ns = s->asked_ns;
		s->successes++;
		close_conn(s);
		arm_next(s);
		if (s->cb)
			s->cb(s->ctx, &m); /* may set a new period */
	} else {
		fail(s);
	}
}

static void on_io(struct fg_loop *loop, int fd, uint32_t events, void *ctx)
{
	struct fg_engine_scrape *s = ctx;
	(void)loop;

	if (!s->connected && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
		int err = 0;
		socklen_t l = sizeof(err);
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) || err) {
			fail(s);
			return;
		}
		s->connected = true;
	}
	if (s->connected && s->sent < s->request_len) {
		ssize_t n = write(fd, s->request + s->sent, s->request_len - s->sent);
		if (n < 0 && errno != EAGAIN) {
			fail(s);
			return;
		}
		if (n > 0)
			s->sent += (size_t)n;
		if (s->sent == s->request_len) {
			s->asked_ns = fg_now_ns();
			fg_loop_mod(s->loop, fd, EPOLLIN);
		}
		return;
	}
	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
		char buf[16384];
		for (;;) {
			ssize_t n = read(fd, buf, sizeof(buf));
			if (n < 0 && errno == EAGAIN)
				return;
			if (n < 0) {
				finish(s);
				return;
			}
			/* n == 0 tells the parser the body ended with the connection */
			size_t used = http_parser_execute(&s->parser, &settings, n ? buf : NULL, (size_t)n);
			if (n == 0 || used != (size_t)n || s->complete) {
				finish(s);
				return;
			}
		}
	}
}

static void tick(struct fg_loop *loop, void *ctx)
{
	struct fg_engine_scrape *s = ctx;

	s->timer = 0;
	if (s->fd >= 0) { /* the one in flight timed out */
		fail(s);
		return;
	}
	s->began_ns = fg_now_ns();
	arm(s, FG_SCRAPE_TIMEOUT_NS);
	s->fd = socket(s->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s->fd < 0) {
		fail(s);
		return;
	}
	s->connected = false;
	s->sent = 0;
	s->complete = s->overflow = false;
	s->body_len = 0;
	http_parser_init(&s->parser, HTTP_RESPONSE);
	s->parser.data = s;
	if (connect(s->fd, (struct sockaddr *)&s->addr, s->addr_len) && errno != EINPROGRESS) {
		close(s->fd);
		s->fd = -1;
		fail(s);
		return;
	}
	if (fg_loop_add(loop, s->fd, EPOLLOUT, on_io, s)) {
		close(s->fd);
		s->fd = -1;
		fail(s);
	}
}

struct fg_engine_scrape *fg_engine_scrape_start(struct fg_loop *loop, const struct fg_hostport *engine,
						uint64_t period_ns, fg_engine_scrape_cb cb, void *ctx)
{
	struct fg_engine_scrape *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->loop = loop;
	s->fd = -1;
	s->period_ns = period_ns ? period_ns : 1000000000ull;
	s->cb = cb;
	s->ctx = ctx;
	if (fg_hostport_sockaddr(engine, &s->addr, &s->addr_len)) {
		free(s);
		return NULL;
	}
	fg_engine_scrape_set_auth(s, "");
	arm(s, 0);
	return s;
}

void fg_engine_scrape_set_auth(struct fg_engine_scrape *s, const char *auth_line)
{
	if (!s)
		return;
	int n = snprintf(s->request, sizeof(s->request),
			 "GET /metrics HTTP/1.1\r\nHost: engine\r\nAccept: text/plain\r\n"
			 "Connection: close\r\nUser-Agent: fairgated\r\n%s\r\n",
			 auth_line ? auth_line : "");
	/* the buffer holds the longest line the caller can make (the header) */
	s->request_len = n > 0 && (size_t)n < sizeof(s->request) ? (size_t)n : 0;
}

void fg_engine_scrape_set_period(struct fg_engine_scrape *s, uint64_t period_ns)
{
	if (!s || !period_ns || period_ns == s->period_ns)
		return;
	s->period_ns = period_ns;
	if (s->fd < 0) /* else the one in flight arms the next when it ends */
		arm_next(s);
}

void fg_engine_scrape_stop(struct fg_engine_scrape *s)
{
	if (!s)
		return;
	fg_loop_timer_cancel(s->loop, s->timer);
	close_conn(s);
	free(s->body);
	free(s);
}

uint64_t fg_engine_scrape_failures(const struct fg_engine_scrape *s)
{
	return s->failures;
}

uint64_t fg_engine_scrape_successes(const struct fg_engine_scrape *s)
{
	return s->successes;
}
