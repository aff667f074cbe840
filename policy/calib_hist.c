/* calib_hist.c — see calib_hist.h. */
#include "calib_hist.h"

#include <math.h>
#include <string.h>

void fg_calib_hist_init(struct fg_calib_hist *h)
{
	memset(h, 0, sizeof(*h));
}

/* The counters, in the order went_back checks them. */
static void counters(const struct fg_engine_totals *t, double *v)
{
	const double x[] = { t->itl_sum,	 t->itl_count,	      t->prefill_sum,
			     t->prefill_count,	 t->prompt_len_sum,   t->prompt_len_count,
			     t->gen_len_sum,	 t->gen_len_count,    t->iterations,
			     t->prompt_tokens,	 t->generation_tokens, t->cache_hits,
			     t->cache_queries,	 t->gw_output_tokens, t->gw_context_tokens };
	memcpy(v, x, sizeof(x));
}
#define N_COUNTERS 15

/* A cumulative figure lower than last time: the engine started again. */
static bool went_back(const struct fg_engine_totals *was, const struct fg_engine_totals *now)
{
	double a[N_COUNTERS], b[N_COUNTERS];

	counters(was, a);
	counters(now, b);
	for (int i = 0; i < N_COUNTERS; i++)
		if (b[i] < a[i])
			return true;
	return false;
}

static void rebase(struct fg_calib_hist *h, uint64_t now_ns, const struct fg_engine_totals *t)
{
	h->base = *t;
	h->base_ns = now_ns;
	h->have_base = true;
	h->running_sum = 0;
	h->running_n = 0;
}

static void take(struct fg_calib_hist *h, struct fg_calib *c, uint64_t now_ns,
		 enum fg_calib_source src, double batch, double context, double prefill,
		 double step_s, double unseen, int *added)
{
	if (fg_calib_add_interval(c, now_ns, src, batch, context, prefill, step_s, unseen) ==
	    FG_CALIB_TAKEN) {
		h->observed[src]++;
		(*added)++;
	} else {
		h->refused++;
	}
}

int fg_calib_hist_scrape(struct fg_calib_hist *h, struct fg_calib *c, uint64_t now_ns,
			 const struct fg_engine_totals *t, double running)
{
	const struct fg_engine_totals *b = &h->base;
	int added = 0;

	if (!h->have_base || t->have != b->have || went_back(b, t)) {
		if (h->have_base)
			h->resets++;
		rebase(h, now_ns, t);
		return 0;
	}
	if (running >= 0) {
		h->running_sum += running;
		h->running_n++;
	}
	if (now_ns - h->base_ns < FG_CALIB_HIST_MIN_NS)
		return 0;
	if (h->paused) {
		h->paused_intervals++;
		rebase(h, now_ns, t);
		return 0;
	}

	unsigned have = t->have;
	double itl_n = t->itl_count - b->itl_count;
	double prefills = t->prefill_count - b->prefill_count;
	double finished = t->prompt_len_count - b->prompt_len_count;
	double finished_out = t->gen_len_count - b->gen_len_count;
	double steps = t->iterations - b->iterations;
	double prompt_tok = t->prompt_tokens - b->prompt_tokens;
	double gen_tok = t->generation_tokens - b->generation_tokens;
	bool decode = (have & FG_ET_ITL) && itl_n >= FG_CALIB_HIST_MIN_TOKENS;
	bool prefill = (have & FG_ET_PREFILL) && prefills >= 1;
	/* the requests that finished give the prompt and output lengths */
	if (!(have & FG_ET_PROMPT_LEN) || !(finished >= 1))
		decode = prefill = false;
	if (decode && (!(have & FG_ET_GEN_LEN) || !(finished_out >= 1)))
		decode = false;

	/* the mean batch: sequences sampled a step, or the gauge's mean */
	double batch = -1;
	if ((have & FG_ET_ITERATIONS) && (have & FG_ET_TOKENS) && steps >= 1)
		batch = gen_tok / steps;
	else if (h->running_n)
		batch = h->running_sum / h->running_n;
	if (!(batch >= 1))
		decode = prefill = false;

	if (!decode && !prefill) {
		if (now_ns - h->base_ns >= FG_CALIB_HIST_MAX_NS) {
			h->sparse++;
			rebase(h, now_ns, t);
		}
		return 0; /* the interval goes on */
	}
	double uncached = 1;
	double queries = t->cache_queries - b->cache_queries;
	if ((have & FG_ET_CACHE) && queries > 0)
		uncached = 1 - fmin(fmax((t->cache_hits - b->cache_hits) / queries, 0), 1);
	double prompt = (t->prompt_len_sum - b->prompt_len_sum) / finished;
	/* a sequence decodes with its prompt and, on average over its
	 * tokens, half its output in KV */
	double out = finished_out >= 1 ? (t->gen_len_sum - b->gen_len_sum) / finished_out : 0;
	double per_seq = prompt + out / 2;
	double gw_out = t->gw_output_tokens - b->gw_output_tokens;
	if ((have & FG_ET_GW_CONTEXT) && gw_out >= 1)
		per_seq = (t->gw_context_tokens - b->gw_context_tokens) / gw_out;
	double context = batch * per_seq;
	double prefill_per_step =
		(have & FG_ET_TOKENS) && (have & FG_ET_ITERATIONS) && steps >= 1
			? prompt_tok * uncached / steps
			: 0;
	/* the output the streams showed one step at a time: the stream source
	 * has those steps already (the inter-token count is the engine's
	 * decode tokens; without the gateway's books, all unseen) */
	double unseen = 1;
	if ((have & FG_ET_GW_CONTEXT) && itl_n > 0)
		unseen = 1 - fmin(fmax((t->gw_streamed_tokens - b->gw_streamed_tokens) / itl_n, 0), 1);
	if (decode)
		take(h, c, now_ns, FG_CALIB_SRC_ENGINE_DECODE, batch, context, prefill_per_step,
		     (t->itl_sum - b->itl_sum) / itl_n, unseen, &added);
	/* A prompt's step may also have prefilled others scheduled with it.
	 * Not added: at a light load the typical prompt runs alone and a
	 * coincidence is rare and large, an outlier the fit trims (adding the
	 * mean step's prefill read 6% low on fairgate-sim, the trimmed
	 * coincidences having carried that mean). */
	if (prefill)
		take(h, c, now_ns, FG_CALIB_SRC_ENGINE_PREFILL, batch, context, prompt * uncached,
		     (t->prefill_sum - b->prefill_sum) / prefills, unseen, &added);
	h->intervals++;
	rebase(h, now_ns, t);
	return added;
}
