/* calib_hist.h — calibration's second source: the engine's own timing
 * histograms and token counters (what vLLM exports on /metrics), read as
 * deltas between scrapes, made into mean steps for policy/calibration.c.
 *
 * Over an interval of at least FG_CALIB_HIST_MIN_NS the engine says:
 *   - vllm:inter_token_latency_seconds _sum/_count: the mean time between a
 *     sequence's tokens, i.e. the mean step of the steps that decoded;
 *   - vllm:request_prefill_time_seconds _sum/_count: the mean time from a
 *     request's first scheduling to its first token, i.e. the step (or
 *     chunks) that prefilled it;
 *   - vllm:request_prompt_tokens / _generation_tokens _sum/_count: the
 *     same finished requests' mean prompt and output;
 *   - vllm:iteration_tokens_total _count, vllm:prompt_tokens_total and
 *     vllm:generation_tokens_total: steps run, tokens prefilled and
 *     sampled, so the mean batch (sequences sampled a step) and the
 *     prompt tokens prefilled a step;
 *   - vllm:prefix_cache_hits_total / _queries_total: the share of prompt
 *     tokens that were not computed.
 * A decode interval is then a step of that batch, each sequence holding
 * its prompt and half its output of KV (the gateway's token-weighted
 * figure when it has one, FG_ET_GW_CONTEXT, else the engine's finished
 * requests' means), with the interval's prefill a step; a prefill
 * interval the same batch with one request's uncached prompt, as if it
 * ran alone in its step. A counter lower than last time is a restarted
 * engine: the interval is dropped and the new values are the baseline.
 *
 * What this cannot see, and the streams can: each step's own batch (the
 * histograms give means, so a batch that swings is read at its mean), and
 * which prompts were prefilled together in one step (an interval where
 * prompts coincided reads high, and is trimmed if it stands out; a load
 * where most prompts share their step reads the prompt-token time high),
 * nor the steps of a prompt chunked over several (its prefill time holds
 * each chunk's fixed part).
 *
 * Pure: the caller gives the clock.
 */
#ifndef FAIRGATE_CALIB_HIST_H
#define FAIRGATE_CALIB_HIST_H

#include <stdbool.h>
#include <stdint.h>

#include "calibration.h"

/* The engine's cumulative figures, as one scrape read them (summed over
 * label sets). `have` says which were there. */
enum {
	FG_ET_ITL = 1,          /* inter-token latency _sum and _count */
	FG_ET_PREFILL = 2,      /* request prefill time _sum and _count */
	FG_ET_PROMPT_LEN = 4,   /* request prompt tokens _sum and _count */
	FG_ET_GEN_LEN = 8,      /* request generation tokens _sum and _count */
	FG_ET_ITERATIONS = 16,  /* iteration tokens _count */
	FG_ET_TOKENS = 32,      /* prompt and generation token counters */
	FG_ET_CACHE = 64,       /* prefix cache hits and queries */
	FG_ET_GW_CONTEXT = 128, /* the gateway's own books (below) */
};

struct fg_engine_totals {
	double itl_sum, itl_count;
	double prefill_sum, prefill_count;
	double prompt_len_sum, prompt_len_count;
	double gen_len_sum, gen_len_count;
	double iterations;
	double prompt_tokens, generation_tokens;
	double cache_hits, cache_queries;
	/* not the engine's: of the requests the gateway saw end, their output
	 * tokens and the KV each output token was decoded with, sum of
	 * n x (prompt + n / 2). Their ratio is the context of a sequence as
	 * the inter-token histogram weighs it (by token), which the engine's
	 * per-request means are not: a mix of long prompts with short answers
	 * and short prompts with long ones decodes mostly the latter. */
	double gw_output_tokens, gw_context_tokens;
	/* and the output tokens the relayed streams showed it one step at a
	 * time (what the stream source fits already) */
	double gw_streamed_tokens;
	unsigned have;
};

#define FG_CALIB_HIST_MIN_NS 1000000000ull   /* an interval is at least a second */
#define FG_CALIB_HIST_MAX_NS 60000000000ull  /* one without enough in it is dropped */
#define FG_CALIB_HIST_MIN_TOKENS 32          /* inter-token gaps for a decode interval */

struct fg_calib_hist {
	struct fg_engine_totals base;   /* as of the interval's start */
	bool paused;                    /* the caller's: intervals are dropped, not observed */
	uint64_t paused_intervals;
	uint64_t base_ns;
	bool have_base;
	double running_sum;             /* vllm:num_requests_running samples since */
	uint32_t running_n;
	uint64_t intervals;             /* closed with at least one observation */
	uint64_t observed[FG_CALIB_SOURCES]; /* taken by the fit, by source */
	uint64_t refused;               /* made but refused by the fit (a sick engine) */
	uint64_t resets;                /* counters that went back: engine restarts */
	uint64_t sparse;                /* intervals dropped with too little in them */
};

void fg_calib_hist_init(struct fg_calib_hist *h);

/* One scrape's totals; `running` the vllm:num_requests_running gauge (< 0
 * when the engine had none). Adds the interval's observations to `c` when
 * it is complete; returns how many it added. */
int fg_calib_hist_scrape(struct fg_calib_hist *h, struct fg_calib *c, uint64_t now_ns,
			 const struct fg_engine_totals *t, double running);

#endif
