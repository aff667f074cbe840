/* engine_scrape.h — read the engine's own view from its Prometheus /metrics.
 *
 * The gateway keeps its own books of what the engine has not started; the
 * engine's vllm:num_requests_waiting cross-checks them (other clients, or
 * preemption, can make the engine slower than the books say), and a rising
 * vllm:num_preemptions_total is an alarm: recompute is the platform's cost.
 * One GET every period on the agent's loop; a scrape that has not finished
 * by the next tick is dropped and counted as a failure.
 */
#ifndef FAIRGATE_ENGINE_SCRAPE_H
#define FAIRGATE_ENGINE_SCRAPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "agent/event_loop.h"
#include "policy/policy.h"

struct fg_engine_metrics {
	double waiting;        /* vllm:num_requests_waiting, summed over label sets */
	double running;        /* vllm:num_requests_running */
	double preemptions;    /* vllm:num_preemptions_total */
	double kv_usage;       /* vllm:kv_cache_usage_perc (max over engines) */
	unsigned found;        /* bit per metric seen: 1 waiting, 2 running, 4 preemptions, 8 kv */
};

/* Parse Prometheus text exposition; unknown lines are skipped. */
void fg_engine_metrics_parse(const char *text, size_t len, struct fg_engine_metrics *out);

struct fg_engine_scrape;
typedef void (*fg_engine_scrape_cb)(void *ctx, const struct fg_engine_metrics *m);

/* Start scraping http://engine/metrics every period_ns; cb runs after each
 * successful scrape. NULL when out of memory. */
struct fg_engine_scrape *fg_engine_scrape_start(struct fg_loop *loop, const struct fg_hostport *engine,
						uint64_t period_ns, fg_engine_scrape_cb cb, void *ctx);
void fg_engine_scrape_stop(struct fg_engine_scrape *s);
uint64_t fg_engine_scrape_failures(const struct fg_engine_scrape *s);
uint64_t fg_engine_scrape_successes(const struct fg_engine_scrape *s);

#endif
