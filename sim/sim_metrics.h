/* sim_metrics.h — /metrics in Prometheus text format with vLLM's metric
 * names (vllm:num_requests_running, vllm:kv_cache_usage_perc,
 * vllm:num_preemptions_total, vllm:prefix_cache_{queries,hits}_total, ...),
 * plus fairgate_sim_* series for what vLLM does not export (recomputed
 * tokens, virtual time, HTTP status counts). */
#ifndef FAIRGATE_SIM_METRICS_H
#define FAIRGATE_SIM_METRICS_H

#include <stdint.h>
#include <stdio.h>

#include "sim/engine.h"

struct sim_http_counters {
	uint64_t by_status[6];   /* index status/100: 1xx..5xx */
	uint64_t requests;
	uint32_t connections;
};

void sim_metrics_write(FILE *out, const struct sim_engine *e, const char *model,
		       const struct sim_http_counters *http);

#endif
