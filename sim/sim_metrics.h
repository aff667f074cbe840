/* sim_metrics.h — /metrics in Prometheus text format with vLLM's metric
 * names, types, labels (model_name, engine) and buckets
 * (vllm:num_requests_running, vllm:kv_cache_usage_perc,
 * vllm:num_preemptions_total, vllm:prefix_cache_{queries,hits}_total, the
 * timing histograms vllm:time_to_first_token_seconds,
 * vllm:inter_token_latency_seconds, vllm:request_{prefill,decode,queue,
 * inference}_time_seconds, vllm:e2e_request_latency_seconds,
 * vllm:iteration_tokens_total, ...), plus fairgate_sim_* series for what
 * vLLM does not export (recomputed tokens, virtual time, replica time by
 * phase, the true and the policy's hardware, HTTP status counts). */
#ifndef FAIRGATE_SIM_METRICS_H
#define FAIRGATE_SIM_METRICS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "sim/engine.h"

struct sim_http_counters {
	uint64_t by_status[6];   /* index status/100: 1xx..5xx */
	uint64_t requests;
	uint32_t connections;
};

/* What the metrics say beside the engine's own state. */
struct sim_metrics_opts {
	bool show_hidden_0_11;     /* --show-hidden-metrics-for-version 0.11 */
	double true_prompt_token_s, policy_prompt_token_s;
	double true_decode_step_s, policy_decode_step_s;
};

void sim_metrics_write(FILE *out, const struct sim_engine *e, const char *model,
		       const struct sim_http_counters *http, const struct sim_metrics_opts *opt);

#endif
