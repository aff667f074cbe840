/* histogram.h — Prometheus histograms with fixed bucket bounds, rendered in
 * the text exposition format (cumulative _bucket, _sum, _count). */
#ifndef FAIRGATE_SIM_HISTOGRAM_H
#define FAIRGATE_SIM_HISTOGRAM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define SIM_HIST_MAX_BUCKETS 32

struct sim_histogram {
	const double *bounds;  /* ascending upper bounds, +Inf implied */
	size_t n_bounds;
	uint64_t counts[SIM_HIST_MAX_BUCKETS + 1];
	uint64_t count;
	double sum;
};

/* vLLM's bucket bounds for these metrics. */
extern const double sim_buckets_ttft_s[];
extern const size_t sim_buckets_ttft_n;
extern const double sim_buckets_itl_s[];
extern const size_t sim_buckets_itl_n;
extern const double sim_buckets_latency_s[];
extern const size_t sim_buckets_latency_n;
extern const double sim_buckets_iteration_tokens[];
extern const size_t sim_buckets_iteration_tokens_n;

/* vLLM's build_1_2_5_buckets: 1, 2, 5, 10, 20, 50, ... up to max (at most
 * SIM_HIST_MAX_BUCKETS of them into out); returns how many. */
size_t sim_buckets_1_2_5(double max, double out[SIM_HIST_MAX_BUCKETS]);

void sim_histogram_init(struct sim_histogram *h, const double *bounds, size_t n);
void sim_histogram_observe(struct sim_histogram *h, double v);

/* Write NAME_bucket{LABELS,le=".."}, NAME_sum, NAME_count; `labels` is the
 * inside of the braces without them (e.g. `model_name="m"`), may be "". */
void sim_histogram_write(const struct sim_histogram *h, FILE *out, const char *name,
			 const char *help, const char *labels);

#endif
