/* engine_scrape.h — read the engine's own view from its Prometheus /metrics.
 *
 * The engine window matches the engine's vllm:num_requests_running and
 * _waiting against what was sent (policy/engine_window.h), which is how a
 * non-streamed request is known to have started; a rising
 * vllm:num_preemptions_total is an alarm: recompute is the platform's cost;
 * the timing histograms and token counters are calibration's second source
 * (policy/calib_hist.h) and cross-check the engine steps it observes in
 * the streams (agent/proxy/calib_observer.c).
 * One GET at a time on the agent's loop, the next one a period after the
 * last one began (never two at once); one that has not finished within
 * FG_SCRAPE_TIMEOUT_NS is dropped and counted as a failure.
 */
#ifndef FAIRGATE_ENGINE_SCRAPE_H
#define FAIRGATE_ENGINE_SCRAPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "lib/event_loop.h"
#include "lib/secret_file.h"
#include "policy/calib_hist.h"
#include "policy/policy.h"

struct fg_engine_metrics {
	double waiting;        /* vllm:num_requests_waiting, summed over label sets */
	double running;        /* vllm:num_requests_running */
	double preemptions;    /* vllm:num_preemptions_total */
	double kv_usage;       /* vllm:kv_cache_usage_perc (max over engines) */
	/* the timing histograms' _sum and _count and the token counters
	 * (policy/calib_hist.h: which ones; summed over label sets), read as
	 * deltas by calibration. The inter-token latency is
	 * vllm:inter_token_latency_seconds, or vllm:time_per_output_token_seconds
	 * from an engine that has only that (before 0.11) */
	struct fg_engine_totals totals;
	unsigned found;        /* bit per metric seen: 1 waiting, 2 running, 4 preemptions, 8 kv,
				* 16 the inter-token histogram's sum and count */
	uint64_t asked_ns;     /* when the request was written: the counts are no older */
};

#define FG_SCRAPE_TIMEOUT_NS 2000000000ull

/* Parse Prometheus text exposition; unknown lines are skipped. */
void fg_engine_metrics_parse(const char *text, size_t len, struct fg_engine_metrics *out);

struct fg_engine_scrape;
typedef void (*fg_engine_scrape_cb)(void *ctx, const struct fg_engine_metrics *m);

/* Start scraping http://engine/metrics every period_ns; cb runs after each
 * successful scrape. NULL when out of memory. */
struct fg_engine_scrape *fg_engine_scrape_start(struct fg_loop *loop, const struct fg_hostport *engine,
						uint64_t period_ns, fg_engine_scrape_cb cb, void *ctx);
void fg_engine_scrape_stop(struct fg_engine_scrape *s);
/* A new period: the next scrape is due a period after the last one began (at
 * once if that is past), or when the one in flight ends. */
/* The scrape request's head, AUTH_LINE included ("Authorization: Bearer
 * KEY\r\n" when the engine takes a key, "" otherwise): it must fit with
 * the fixed lines. */
#define FG_SCRAPE_REQUEST_MAX (FG_SECRET_LINE_MAX + 512)
void fg_engine_scrape_set_auth(struct fg_engine_scrape *s, const char *auth_line);
void fg_engine_scrape_set_period(struct fg_engine_scrape *s, uint64_t period_ns);
uint64_t fg_engine_scrape_failures(const struct fg_engine_scrape *s);
uint64_t fg_engine_scrape_successes(const struct fg_engine_scrape *s);

#endif
