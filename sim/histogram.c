/* histogram.c — see histogram.h. */
#include "histogram.h"

#include <string.h>

const double sim_buckets_ttft_s[] = { 0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
				      0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
				      40.0, 80.0, 160.0, 640.0, 2560.0 };
const size_t sim_buckets_ttft_n = sizeof(sim_buckets_ttft_s) / sizeof(double);
const double sim_buckets_itl_s[] = { 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4,
				      0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0 };
const size_t sim_buckets_itl_n = sizeof(sim_buckets_itl_s) / sizeof(double);
const double sim_buckets_latency_s[] = { 0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0,
					 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
					 960.0, 1920.0, 7680.0 };
const size_t sim_buckets_latency_n = sizeof(sim_buckets_latency_s) / sizeof(double);
const double sim_buckets_iteration_tokens[] = { 1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048,
						4096, 8192, 16384 };
const size_t sim_buckets_iteration_tokens_n =
	sizeof(sim_buckets_iteration_tokens) / sizeof(double);

size_t sim_buckets_1_2_5(double max, double out[SIM_HIST_MAX_BUCKETS])
{
	static const double mantissa[] = { 1, 2, 5 };
	size_t n = 0;

	for (double scale = 1; n < SIM_HIST_MAX_BUCKETS; scale *= 10)
		for (size_t i = 0; i < 3; i++) {
			if (mantissa[i] * scale > max || n == SIM_HIST_MAX_BUCKETS)
				return n;
			out[n++] = mantissa[i] * scale;
		}
	return n;
}

void sim_histogram_init(struct sim_histogram *h, const double *bounds, size_t n)
{
	memset(h, 0, sizeof(*h));
	h->bounds = bounds;
	h->n_bounds = n > SIM_HIST_MAX_BUCKETS ? SIM_HIST_MAX_BUCKETS : n;
}

void sim_histogram_observe(struct sim_histogram *h, double v)
{
	size_t i = 0;

	while (i < h->n_bounds && v > h->bounds[i])
		i++;
	h->counts[i]++;
	h->count++;
	h->sum += v;
}

void sim_histogram_write(const struct sim_histogram *h, FILE *out, const char *name,
			 const char *help, const char *labels)
{
	const char *sep = labels && *labels ? "," : "";
	uint64_t cum = 0;

	if (!labels)
		labels = "";
	fprintf(out, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
	for (size_t i = 0; i < h->n_bounds; i++) {
		cum += h->counts[i];
		fprintf(out, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, sep, h->bounds[i],
			(unsigned long long)cum);
	}
	cum += h->counts[h->n_bounds];
	fprintf(out, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep,
		(unsigned long long)cum);
	fprintf(out, "%s_sum{%s} %.9g\n%s_count{%s} %llu\n", name, labels, h->sum, name, labels,
		(unsigned long long)h->count);
}
