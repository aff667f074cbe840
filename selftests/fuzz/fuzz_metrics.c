/* fuzz_metrics.c — libFuzzer target: the engine's Prometheus /metrics text
 * as the agent's scraper reads it (fg_engine_metrics_parse), arbitrary
 * bytes.
 *
 * Invariants: only the five known bits are ever set, and only for a metric
 * whose name appears in the text (the inter-token histogram's bit for its
 * _sum and _count both); every number handed to the gateway is finite and
 * non-negative (it compares them with its own books); and the parse is
 * line-local: the text cut at any line break parses into two halves that
 * combine (sums add, the KV gauge takes the max, the gauges' bits OR) to
 * the whole; the histogram's bit, which needs two lines, is set in the
 * whole when either half has it. The same for calibration's totals
 * (policy/calib_hist.h): finite, non-negative, additive, their bits only
 * for names in the text; the inter-token pair may come from the deprecated
 * vllm:time_per_output_token_seconds when the new name is missing (the
 * inter-token sums are then not additive: a half may take either). */
#include <math.h>
#include <string.h>

#include "agent/http/engine_scrape.h"
#include "selftests/fuzz/fuzz_common.h"

static const char *const names[4] = {
	"vllm:num_requests_waiting", "vllm:num_requests_running",
	"vllm:num_preemptions_total", "vllm:kv_cache_usage_perc",
};

static bool usable(double v)
{
	return isfinite(v) && v >= 0;
}

static bool close_to(double a, double b)
{
	if (!isfinite(a) || !isfinite(b))
		return a == b || (isnan(a) && isnan(b));
	return fabs(a - b) <= 1e-9 * fmax(1, fmax(fabs(a), fabs(b)));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	struct fg_engine_metrics m, a, b;

	fg_engine_metrics_parse(text, size, &m);
	FUZZ_CHECK(!(m.found & ~31u), "found bits %#x", m.found);
	bool tpot = memmem(text, size, "vllm:time_per_output_token_seconds", 34) != NULL;
	if (m.found & 16)
		FUZZ_CHECK((memmem(text, size, "vllm:inter_token_latency_seconds_sum", 36) &&
			    memmem(text, size, "vllm:inter_token_latency_seconds_count", 38)) ||
				   (memmem(text, size, "vllm:time_per_output_token_seconds_sum", 38) &&
				    memmem(text, size, "vllm:time_per_output_token_seconds_count", 40)),
			   "the inter-token histogram found but not in the text");
	FUZZ_CHECK(!(m.totals.have & ~255u), "totals bits %#x", m.totals.have);
	FUZZ_CHECK(!(m.totals.have & FG_ET_PREFILL) ||
			   memmem(text, size, "vllm:request_prefill_time_seconds_count", 39),
		   "the prefill histogram found but not in the text");
	FUZZ_CHECK(!(m.totals.have & FG_ET_TOKENS) ||
			   (memmem(text, size, "vllm:prompt_tokens_total", 24) &&
			    memmem(text, size, "vllm:generation_tokens_total", 28)),
		   "the token counters found but not in the text");
	const double tot[] = { m.totals.prefill_sum,	 m.totals.prefill_count,
			       m.totals.prompt_len_sum,	 m.totals.prompt_len_count,
			       m.totals.gen_len_sum,	 m.totals.gen_len_count,
			       m.totals.iterations,	 m.totals.prompt_tokens,
			       m.totals.generation_tokens, m.totals.cache_hits,
			       m.totals.cache_queries };
	for (size_t i = 0; i < sizeof(tot) / sizeof(*tot); i++)
		FUZZ_CHECK(usable(tot[i]), "total %zu is %g", i, tot[i]);
	for (int i = 0; i < 4; i++)
		if (m.found & (1u << i))
			FUZZ_CHECK(memmem(text, size, names[i], strlen(names[i])),
				   "%s found but not in the text", names[i]);
	FUZZ_CHECK(usable(m.waiting) && usable(m.running) && usable(m.preemptions) &&
			   usable(m.kv_usage) && usable(m.totals.itl_sum) && usable(m.totals.itl_count),
		   "waiting %g running %g preemptions %g kv %g itl %g / %g", m.waiting, m.running,
		   m.preemptions, m.kv_usage, m.totals.itl_sum, m.totals.itl_count);

	/* Cut after the line break nearest the middle. */
	const char *nl = size ? memchr(text + size / 2, '\n', size - size / 2) : NULL;
	if (!nl)
		return 0;
	size_t cut = (size_t)(nl - text) + 1;
	fg_engine_metrics_parse(text, cut, &a);
	fg_engine_metrics_parse(text + cut, size - cut, &b);
	FUZZ_CHECK(((a.found | b.found) & 15u) == (m.found & 15u), "bits %#x | %#x != %#x",
		   a.found, b.found, m.found);
	FUZZ_CHECK(!((a.found | b.found) & 16) || (m.found & 16),
		   "a half has the inter-token histogram, the whole does not");
	FUZZ_CHECK(close_to(a.waiting + b.waiting, m.waiting), "waiting not additive");
	FUZZ_CHECK(close_to(a.running + b.running, m.running), "running not additive");
	FUZZ_CHECK(close_to(a.preemptions + b.preemptions, m.preemptions),
		   "preemptions not additive");
	FUZZ_CHECK(fmax(a.kv_usage, b.kv_usage) == m.kv_usage, "kv usage not the max");
	if (!tpot) {
		FUZZ_CHECK(close_to(a.totals.itl_sum + b.totals.itl_sum, m.totals.itl_sum),
			   "inter-token sum not additive");
		FUZZ_CHECK(close_to(a.totals.itl_count + b.totals.itl_count, m.totals.itl_count),
			   "inter-token count not additive");
	}
	FUZZ_CHECK(close_to(a.totals.prefill_sum + b.totals.prefill_sum, m.totals.prefill_sum),
		   "prefill sum not additive");
	FUZZ_CHECK(close_to(a.totals.generation_tokens + b.totals.generation_tokens,
			    m.totals.generation_tokens),
		   "generation tokens not additive");
	FUZZ_CHECK(close_to(a.totals.iterations + b.totals.iterations, m.totals.iterations),
		   "iterations not additive");
	FUZZ_CHECK(!((a.totals.have | b.totals.have) & ~(unsigned)FG_ET_ITL & ~m.totals.have),
		   "a half has totals %#x | %#x the whole has not (%#x)", a.totals.have,
		   b.totals.have, m.totals.have);
	return 0;
}
