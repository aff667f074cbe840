/* test_engine_scrape.c — parsing the engine's Prometheus text, and scraping
 * it over real loopback TCP (a canned server on the same event loop). */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "agent/http/engine_scrape.h"

static const char exposition[] =
	"# HELP vllm:num_requests_waiting Number of requests waiting.\n"
	"# TYPE vllm:num_requests_waiting gauge\n"
	"vllm:num_requests_waiting{model_name=\"m\",engine=\"0\"} 3\n"
	"vllm:num_requests_waiting{model_name=\"m\",engine=\"1\"} 4\n"
	"vllm:num_requests_running{model_name=\"a b {x}\",engine=\"0\"} 17\n"
	"vllm:num_preemptions_total{model_name=\"m\"} 12\n"
	"vllm:num_preemptions_created 1.7e9\n"
	"vllm:kv_cache_usage_perc{engine=\"0\"} 0.25\n"
	"vllm:kv_cache_usage_perc{engine=\"1\"} 0.5\n"
	"vllm:num_requests_waiting_other 99\n"
	"garbage line without value\n"
	"vllm:num_requests_waiting{engine=\"2\"} NaN\n"
	"vllm:inter_token_latency_seconds_bucket{engine=\"0\",le=\"0.01\"} 5\n"
	"vllm:inter_token_latency_seconds_sum{engine=\"0\"} 1.5\n"
	"vllm:inter_token_latency_seconds_count{engine=\"0\"} 100\n"
	"vllm:inter_token_latency_seconds_sum{engine=\"1\"} 0.5\n"
	"vllm:inter_token_latency_seconds_count{engine=\"1\"} 60\n";

/* The timing histograms and token counters calibration reads, as the
 * sim and vLLM write them; the deprecated TPOT name only when the new one
 * is missing; a pair with one half missing is not there. */
static const char timings[] =
	"vllm:time_per_output_token_seconds_sum{engine=\"0\"} 99\n"
	"vllm:time_per_output_token_seconds_count{engine=\"0\"} 99\n"
	"vllm:inter_token_latency_seconds_sum{engine=\"0\"} 1.5\n"
	"vllm:inter_token_latency_seconds_count{engine=\"0\"} 100\n"
	"vllm:request_prefill_time_seconds_bucket{le=\"0.3\"} 2\n"
	"vllm:request_prefill_time_seconds_sum{engine=\"0\"} 0.25\n"
	"vllm:request_prefill_time_seconds_count{engine=\"0\"} 2\n"
	"vllm:request_prompt_tokens_sum{engine=\"0\"} 3000\n"
	"vllm:request_prompt_tokens_count{engine=\"0\"} 3\n"
	"vllm:request_generation_tokens_sum{engine=\"0\"} 60\n"
	"vllm:request_generation_tokens_count{engine=\"0\"} 3\n"
	"vllm:iteration_tokens_total_sum{engine=\"0\"} 5000\n"
	"vllm:iteration_tokens_total_count{engine=\"0\"} 40\n"
	"vllm:prompt_tokens_total{engine=\"0\"} 3000\n"
	"vllm:generation_tokens_total{engine=\"0\"} 160\n"
	"vllm:generation_tokens_total{engine=\"1\"} 40\n"
	"vllm:prefix_cache_hits_total{engine=\"0\"} 512\n";

static void parses_timings(void **state)
{
	(void)state;
	struct fg_engine_metrics m;
	fg_engine_metrics_parse(timings, strlen(timings), &m);
	const struct fg_engine_totals *t = &m.totals;
	assert_true(t->itl_sum == 1.5 && t->itl_count == 100);
	assert_true(t->prefill_sum == 0.25 && t->prefill_count == 2);
	assert_true(t->prompt_len_sum == 3000 && t->prompt_len_count == 3);
	assert_true(t->gen_len_sum == 60 && t->gen_len_count == 3);
	assert_true(t->iterations == 40);
	assert_true(t->prompt_tokens == 3000 && t->generation_tokens == 200);
	assert_int_equal(t->have, FG_ET_ITL | FG_ET_PREFILL | FG_ET_PROMPT_LEN | FG_ET_GEN_LEN |
					  FG_ET_ITERATIONS | FG_ET_TOKENS); /* no cache queries */
	assert_int_equal(m.found, 16);
	/* an engine before 0.11: the deprecated name stands in */
	const char *old = strstr(timings, "vllm:inter_token");
	char buf[sizeof(timings)];
	size_t head = (size_t)(old - timings);
	memcpy(buf, timings, head);
	const char *rest = strstr(old, "vllm:request_prefill");
	strcpy(buf + head, rest);
	fg_engine_metrics_parse(buf, strlen(buf), &m);
	assert_true(m.totals.itl_sum == 99 && m.totals.itl_count == 99);
	assert_true(m.totals.have & FG_ET_ITL);
}

static void parses_and_sums(void **state)
{
	(void)state;
	struct fg_engine_metrics m;
	fg_engine_metrics_parse(exposition, strlen(exposition), &m);
	assert_true(m.waiting == 7);
	assert_true(m.running == 17);
	assert_true(m.preemptions == 12);
	assert_true(m.kv_usage == 0.5);
	assert_true(m.totals.itl_sum == 2.0 && m.totals.itl_count == 160);
	assert_int_equal(m.found, 31);
	/* truncated anywhere: never reads past the end */
	for (size_t i = 0; i < strlen(exposition); i++)
		fg_engine_metrics_parse(exposition, i, &m);
	fg_engine_metrics_parse("", 0, &m);
	assert_int_equal(m.found, 0);
}

struct server {
	int lfd;
	int served;
	const char *response;
};

static void on_request(struct fg_loop *loop, int fd, uint32_t ev, void *ctx)
{
	struct server *sv = ctx;
	char req[1024];
	(void)ev;
	/* the GET is one small segment on loopback: answer once it is here */
	if (read(fd, req, sizeof(req)) <= 0 && errno == EAGAIN)
		return;
	ssize_t w = write(fd, sv->response, strlen(sv->response));
	(void)w;
	fg_loop_del(loop, fd);
	close(fd);
	sv->served++;
}

static void on_accept(struct fg_loop *loop, int fd, uint32_t ev, void *ctx)
{
	(void)ev;
	int c = accept4(fd, NULL, NULL, SOCK_NONBLOCK);
	if (c >= 0 && fg_loop_add(loop, c, EPOLLIN, on_request, ctx))
		close(c);
}

struct seen {
	int calls;
	struct fg_engine_metrics last;
	struct fg_loop *loop;
};

static void on_update(void *ctx, const struct fg_engine_metrics *m)
{
	struct seen *s = ctx;
	s->calls++;
	s->last = *m;
	if (s->calls == 2)
		fg_loop_stop(s->loop);
}

static void give_up(struct fg_loop *loop, void *ctx)
{
	(void)ctx;
	fg_loop_stop(loop);
}

static int listen_loopback(uint16_t *port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t l = sizeof(a);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 8) ||
	    getsockname(fd, (struct sockaddr *)&a, &l))
		return -1;
	*port = ntohs(a.sin_port);
	return fd;
}

static void scrape_over_tcp(const char *response, int want_calls, uint64_t want_failures_min)
{
	struct fg_loop *loop = fg_loop_new();
	struct server sv = { .response = response };
	uint16_t port;
	sv.lfd = listen_loopback(&port);
	assert_true(sv.lfd >= 0);
	assert_int_equal(fg_loop_add(loop, sv.lfd, EPOLLIN, on_accept, &sv), 0);
	struct fg_hostport hp = { .host = "127.0.0.1", .port = port };
	struct seen seen = { .loop = loop };
	struct fg_engine_scrape *s = fg_engine_scrape_start(loop, &hp, 50000000ull, on_update, &seen);
	assert_non_null(s);
	fg_loop_timer(loop, 2000000000ull, give_up, NULL);
	fg_loop_run(loop);
	assert_int_equal(seen.calls, want_calls);
	if (want_calls)
		assert_true(seen.last.waiting == 7 && seen.last.preemptions == 12);
	assert_true(fg_engine_scrape_failures(s) >= want_failures_min);
	fg_engine_scrape_stop(s);
	close(sv.lfd);
	fg_loop_free(loop);
}

static void scrapes_plain_and_chunked(void **state)
{
	(void)state;
	static char plain[4096], chunked[4096];
	snprintf(plain, sizeof(plain), "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n%s", exposition);
	scrape_over_tcp(plain, 2, 0);
	snprintf(chunked, sizeof(chunked),
		 "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%zx\r\n%s\r\n0\r\n\r\n",
		 strlen(exposition), exposition);
	scrape_over_tcp(chunked, 2, 0);
}

static void errors_count_as_failures(void **state)
{
	(void)state;
	scrape_over_tcp("HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n", 0, 5);
	scrape_over_tcp("this is not http\r\n\r\n", 0, 5);
	/* nobody listening */
	struct fg_loop *loop = fg_loop_new();
	uint16_t port;
	int fd = listen_loopback(&port);
	close(fd);
	struct fg_hostport hp = { .host = "127.0.0.1", .port = port };
	struct seen seen = { .loop = loop };
	struct fg_engine_scrape *s = fg_engine_scrape_start(loop, &hp, 50000000ull, on_update, &seen);
	fg_loop_timer(loop, 500000000ull, give_up, NULL);
	fg_loop_run(loop);
	assert_int_equal(seen.calls, 0);
	assert_true(fg_engine_scrape_failures(s) >= 3);
	fg_engine_scrape_stop(s);
	fg_loop_free(loop);
	/* not a numeric address */
	struct fg_hostport bad = { .host = "engine.local", .port = 1 };
	assert_null(fg_engine_scrape_start(loop = fg_loop_new(), &bad, 1, on_update, &seen));
	fg_loop_free(loop);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(parses_and_sums),
		cmocka_unit_test(parses_timings),
		cmocka_unit_test(scrapes_plain_and_chunked),
		cmocka_unit_test(errors_count_as_failures),
	};
	return cmocka_run_group_tests_name("engine_scrape", tests, NULL, NULL);
}
