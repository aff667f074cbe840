/* metrics.h — Prometheus text exposition on agent.metrics_listen: per-tenant
 * units, requests by outcome, bucket/reservation/in-flight gauges, engine
 * queue gauges, and the admission decision latency histogram. */
#ifndef FAIRGATE_METRICS_H
#define FAIRGATE_METRICS_H

#include <stddef.h>
#include <stdint.h>

#define FG_DECISION_BUCKETS 16

struct fg_metrics {
	int listen_fd;
	uint64_t decision_count;
	double decision_sum_s;
	uint64_t decision_hist[FG_DECISION_BUCKETS + 1]; /* last = +Inf only */
	uint64_t unauthenticated;       /* 401s */
	uint64_t malformed;             /* requests refused before a tenant was known */
	uint64_t metrics_unauthorized;  /* scrapes without agent.metrics_token_file's token */
	uint64_t scrapers_evicted;      /* idle metrics connections closed to make room */
	uint64_t over_budget;           /* 503s: a body past agent.limits.max_buffered_bytes */
	uint64_t connections_total;
	uint64_t engine_connects;
	uint64_t engine_moves;    /* pooled connections moved to another worker's loop */
	uint64_t engine_failures;
	uint64_t engine_retries;
	uint64_t refused_path[3];       /* 400 non-canonical target, 404, 405 */
	uint64_t tokenize[3];           /* exact counts asked of the engine: ok, failed, timeout */
	uint64_t tokenize_count;        /* and how long they took */
	double tokenize_sum_s;
	uint64_t tokenize_hist[FG_DECISION_BUCKETS + 1];
};

struct fg_proxy;
int fg_metrics_start(struct fg_proxy *px, char *err, size_t errlen);
void fg_metrics_stop(struct fg_proxy *px);
void fg_metrics_observe_decision(struct fg_metrics *m, uint64_t ns);
void fg_metrics_observe_tokenize(struct fg_metrics *m, uint64_t ns);
/* The whole exposition (malloc'd, NUL-terminated), for tests and ctl too. */
char *fg_metrics_render(struct fg_proxy *px, size_t *len);

#endif
