/* sim_metrics.c — see sim_metrics.h. */
#include "sim_metrics.h"

static void counter(FILE *out, const char *name, const char *help, const char *labels,
		    unsigned long long v)
{
	fprintf(out, "# HELP %s %s\n# TYPE %s counter\n%s_total{%s} %llu\n", name, help, name,
		name, labels, v);
}

static void gauge(FILE *out, const char *name, const char *help, const char *labels, double v)
{
	fprintf(out, "# HELP %s %s\n# TYPE %s gauge\n%s{%s} %.9g\n", name, help, name, name,
		labels, v);
}

void sim_metrics_write(FILE *out, const struct sim_engine *e, const char *model,
		       const struct sim_http_counters *http, const struct sim_metrics_opts *opt)
{
	const struct sim_engine_stats *st = sim_engine_stats(e);
	const struct sim_kv_pool *pool = sim_engine_pool(e);
	char labels[160];

	snprintf(labels, sizeof(labels), "model_name=\"%s\",engine=\"0\"", model);
	gauge(out, "vllm:num_requests_running", "Number of requests in model execution batches.",
	      labels, sim_engine_num_running(e));
	gauge(out, "vllm:num_requests_waiting", "Number of requests waiting to be processed.",
	      labels, sim_engine_num_waiting(e));
	gauge(out, "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.",
	      labels, sim_kv_pool_usage(pool));
	counter(out, "vllm:num_preemptions", "Cumulative number of preemption from the engine.",
		labels, st->num_preemptions);
	counter(out, "vllm:prefix_cache_queries",
		"Prefix cache queries, in terms of number of queried tokens.", labels,
		st->prefix_cache_queries);
	counter(out, "vllm:prefix_cache_hits",
		"Prefix cache hits, in terms of number of cached tokens.", labels,
		st->prefix_cache_hits);
	counter(out, "vllm:prompt_tokens", "Number of prefill tokens processed.", labels,
		st->prompt_tokens);
	counter(out, "vllm:generation_tokens", "Number of generation tokens processed.", labels,
		st->generation_tokens);

	fprintf(out, "# HELP vllm:request_success Count of successfully processed requests.\n"
		     "# TYPE vllm:request_success counter\n");
	for (int f = SIM_FINISH_LENGTH; f <= SIM_FINISH_ABORT; f++)
		fprintf(out, "vllm:request_success_total{%s,finished_reason=\"%s\"} %llu\n", labels,
			sim_finish_reason((enum sim_finish)f),
			(unsigned long long)st->requests_finished[f]);

	/* vLLM's names, help texts and buckets (v1/metrics/loggers.py), in
	 * virtual seconds */
	sim_histogram_write(&st->prompt_len, out, "vllm:request_prompt_tokens",
			    "Number of prefill tokens processed.", labels);
	sim_histogram_write(&st->generation_len, out, "vllm:request_generation_tokens",
			    "Number of generation tokens processed.", labels);
	sim_histogram_write(&st->iteration_tokens, out, "vllm:iteration_tokens_total",
			    "Histogram of number of tokens per engine_step.", labels);
	sim_histogram_write(&st->ttft, out, "vllm:time_to_first_token_seconds",
			    "Histogram of time to first token in seconds.", labels);
	if (opt->show_hidden_0_11)
		sim_histogram_write(&st->itl, out, "vllm:time_per_output_token_seconds",
				    "Histogram of time per output token in seconds."
				    "DEPRECATED: Use vllm:inter_token_latency_seconds instead.",
				    labels);
	sim_histogram_write(&st->itl, out, "vllm:inter_token_latency_seconds",
			    "Histogram of inter-token latency in seconds.", labels);
	sim_histogram_write(&st->request_tpot, out, "vllm:request_time_per_output_token_seconds",
			    "Histogram of time_per_output_token_seconds per request.", labels);
	sim_histogram_write(&st->e2e, out, "vllm:e2e_request_latency_seconds",
			    "Histogram of e2e request latency in seconds.", labels);
	sim_histogram_write(&st->queue, out, "vllm:request_queue_time_seconds",
			    "Histogram of time spent in WAITING phase for request.", labels);
	sim_histogram_write(&st->inference, out, "vllm:request_inference_time_seconds",
			    "Histogram of time spent in RUNNING phase for request.", labels);
	sim_histogram_write(&st->prefill, out, "vllm:request_prefill_time_seconds",
			    "Histogram of time spent in PREFILL phase for request.", labels);
	sim_histogram_write(&st->decode, out, "vllm:request_decode_time_seconds",
			    "Histogram of time spent in DECODE phase for request.", labels);

	counter(out, "fairgate_sim_recomputed_tokens",
		"Prompt and output tokens prefilled again after preemption.", labels,
		st->recomputed_tokens);
	counter(out, "fairgate_sim_prefill_tokens",
		"Tokens prefilled (prefix-cache hits excluded, recompute included).", labels,
		st->prefill_tokens_computed);
	counter(out, "fairgate_sim_steps", "Engine steps run.", labels, st->steps);
	counter(out, "fairgate_sim_kv_cache_evictions",
		"Prefix-cached blocks reused for new content.", labels, pool->evictions);
	gauge(out, "fairgate_sim_virtual_time_seconds", "The engine's virtual clock.", labels,
	      sim_engine_now(e));
	gauge(out, "fairgate_sim_busy_seconds", "Virtual time spent in steps.", labels,
	      st->busy_s);
	fprintf(out, "# HELP fairgate_sim_replica_seconds Replica time charged to sequences, "
		     "by phase (their shares of each step; sums to the busy time).\n"
		     "# TYPE fairgate_sim_replica_seconds counter\n"
		     "fairgate_sim_replica_seconds_total{%s,phase=\"prefill\"} %.9g\n"
		     "fairgate_sim_replica_seconds_total{%s,phase=\"decode\"} %.9g\n",
		labels, st->replica_prefill_s, labels, st->replica_decode_s);
	/* the hardware the sim really is (truth.h), next to the policy's */
	gauge(out, "fairgate_sim_true_prompt_token_seconds",
	      "Time of one prompt token on the simulated hardware.", labels,
	      opt->true_prompt_token_s);
	gauge(out, "fairgate_sim_policy_prompt_token_seconds",
	      "Time of one prompt token in the policy's cost model.", labels,
	      opt->policy_prompt_token_s);
	gauge(out, "fairgate_sim_true_decode_step_seconds",
	      "Decode step at the policy's reference batch and context, simulated hardware.",
	      labels, opt->true_decode_step_s);
	gauge(out, "fairgate_sim_policy_decode_step_seconds",
	      "Decode step at the reference batch and context, the policy's cost model.", labels,
	      opt->policy_decode_step_s);
	gauge(out, "fairgate_sim_step_overhead_seconds", "Fixed time of every engine step.",
	      labels, sim_engine_config(e)->step_overhead_s);
	gauge(out, "fairgate_sim_seq_overhead_seconds",
	      "Time per scheduled sequence per engine step.", labels,
	      sim_engine_config(e)->seq_overhead_s);
	gauge(out, "fairgate_sim_kv_cache_blocks", "Blocks in the KV pool.", labels,
	      pool->num_blocks);
	gauge(out, "fairgate_sim_kv_cache_free_blocks",
	      "Blocks held by no sequence (some still prefix-cached).", labels,
	      sim_kv_pool_num_free(pool));
	gauge(out, "fairgate_sim_kv_cache_cached_blocks", "Blocks registered in the prefix cache.",
	      labels, pool->num_cached);
	gauge(out, "fairgate_sim_http_connections", "Open HTTP connections.", labels,
	      http->connections);
	fprintf(out, "# HELP fairgate_sim_http_responses HTTP responses by status class.\n"
		     "# TYPE fairgate_sim_http_responses counter\n");
	for (int k = 1; k <= 5; k++)
		fprintf(out, "fairgate_sim_http_responses_total{%s,code=\"%dxx\"} %llu\n", labels, k,
			(unsigned long long)http->by_status[k]);
}
