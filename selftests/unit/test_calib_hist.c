/* test_calib_hist.c — calibration's second source (policy/calib_hist.c):
 * the engine's histogram and counter deltas between scrapes made into mean
 * steps (hand-computed vectors), restarts and sparse intervals, a fit from
 * the histograms alone recovering a known truth, the two sources weighted
 * so neither swamps the other, and a sick engine's histograms kept within
 * the box and the follow's floor and ceiling. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>

#include "selftests/unit/assert_near.h"
#include "selftests/unit/calib_models.h"
#include "policy/calib_follow.h"
#include "policy/calib_hist.h"
#include "policy/calibration.h"
#include "policy/cost_model.h"
#include "policy/policy.h"

#define ALL (FG_ET_ITL | FG_ET_PREFILL | FG_ET_PROMPT_LEN | FG_ET_GEN_LEN | FG_ET_ITERATIONS | \
	     FG_ET_TOKENS | FG_ET_CACHE)


struct rig {
	struct fg_cost_model assumed, truth;
	struct fg_calib *calib;
	struct fg_calib_hist hist;
	struct fg_engine_totals t; /* the engine's counters so far */
};

static int rig_up(void **state)
{
	struct rig *r = test_calloc(1, sizeof(*r));

	models(&r->assumed, &r->truth);
	r->calib = test_malloc(sizeof(*r->calib));
	fg_calib_init(r->calib, &r->assumed);
	fg_calib_hist_init(&r->hist);
	r->t.have = ALL;
	*state = r;
	return 0;
}

static int rig_down(void **state)
{
	struct rig *r = *state;

	test_free(r->calib);
	test_free(r);
	return 0;
}

static const struct fg_calib_step *interval(const struct fg_calib *c, uint32_t i,
					    enum fg_calib_source *src)
{
	uint32_t k = (c->ihead + i) % FG_CALIB_IWINDOW;
	*src = (enum fg_calib_source)c->isrc[k];
	return &c->iwin[k];
}

/* Two scrapes 2 s apart; by hand: 40 inter-token gaps of 0.8 s in all
 * (a 20 ms step), 2 requests finished with 1,000-token prompts and 50-token
 * outputs after 0.15 s of prefill each, 10 steps sampling 42 tokens (a
 * batch of 4.2), 2,000 prompt tokens of which 500 of 2,000 queried were
 * prefix-cache hits (75% computed). So: decode = a step of 4.2 sequences
 * holding 4.2 x (1,000 + 50 / 2) = 4,305 tokens, 2,000 x 0.75 / 10 = 150
 * prefilled a step, 20 ms; prefill = the same batch and KV with 750
 * prompt tokens, 150 ms. */
static void deltas_by_hand(void **state)
{
	struct rig *r = *state;
	struct fg_engine_totals t = { .have = ALL, .itl_sum = 5, .itl_count = 100,
				      .prefill_sum = 1, .prefill_count = 3,
				      .prompt_len_sum = 900, .prompt_len_count = 3,
				      .gen_len_sum = 30, .gen_len_count = 3, .iterations = 7,
				      .prompt_tokens = 900, .generation_tokens = 130,
				      .cache_hits = 10, .cache_queries = 900 };
	enum fg_calib_source src;

	assert_int_equal(fg_calib_hist_scrape(&r->hist, r->calib, 10 * SEC, &t, 3), 0);
	t.itl_sum += 0.8, t.itl_count += 40;
	t.prefill_sum += 0.3, t.prefill_count += 2;
	t.prompt_len_sum += 2000, t.prompt_len_count += 2;
	t.gen_len_sum += 100, t.gen_len_count += 2;
	t.iterations += 10, t.generation_tokens += 42, t.prompt_tokens += 2000;
	t.cache_hits += 500, t.cache_queries += 2000;
	assert_int_equal(fg_calib_hist_scrape(&r->hist, r->calib, 12 * SEC, &t, 5), 2);
	assert_int_equal(r->calib->ilen, 2);
	const struct fg_calib_step *d = interval(r->calib, 0, &src);
	assert_int_equal(src, FG_CALIB_SRC_ENGINE_DECODE);
	assert_near(d->batch, 4.2);
	assert_near(d->context, 4305);
	assert_near(d->prefill_tokens, 150);
	assert_near(d->step_s, 0.02);
	const struct fg_calib_step *p = interval(r->calib, 1, &src);
	assert_int_equal(src, FG_CALIB_SRC_ENGINE_PREFILL);
	assert_near(p->batch, 4.2);
	assert_near(p->context, 4305);
	assert_near(p->prefill_tokens, 750);
	assert_near(p->step_s, 0.15);
	assert_int_equal(r->hist.observed[FG_CALIB_SRC_ENGINE_DECODE], 1);
	assert_int_equal(r->hist.observed[FG_CALIB_SRC_ENGINE_PREFILL], 1);

	/* without the iteration histogram the batch is the running gauge's
	 * mean over the interval's scrapes: (6 + 8) / 2 = 7 */
	t.have &= ~(unsigned)FG_ET_ITERATIONS;
	assert_int_equal(fg_calib_hist_scrape(&r->hist, r->calib, 13 * SEC, &t, 5), 0); /* rebase */
	t.itl_sum += 1, t.itl_count += 50;
	assert_int_equal(fg_calib_hist_scrape(&r->hist, r->calib, 13 * SEC + SEC / 2, &t, 6), 0);
	t.prompt_len_sum += 100, t.prompt_len_count += 1, t.gen_len_sum += 20, t.gen_len_count += 1;
	assert_int_equal(fg_calib_hist_scrape(&r->hist, r->calib, 14 * SEC + SEC / 10, &t, 8), 1);
	d = interval(r->calib, 2, &src);
	assert_int_equal(src, FG_CALIB_SRC_ENGINE_DECODE);
	assert_near(d->batch, 7);
	assert_near(d->context, 7 * (100 + 10));
	assert_near(d->prefill_tokens, 0); /* no steps counted: no per-step prefill */
	assert_near(d->step_s, 0.02);
	assert_int_equal(r->hist.resets, 1); /* what it exported changed: a new baseline */
}

/* The gateway's books give the context as the inter-token histogram
 * weighs it: 10 answers of 200 tokens to 100-token prompts and 10 of 10
 * tokens to 2,000-token prompts decode with (10 x 200 x (100 + 100) +
 * 10 x 10 x (2,000 + 5)) / (10 x 200 + 10 x 10) = 295.5 tokens a sequence,
 * where the finished requests' means say 1,050 + 105 / 2 = 1,102.5. Paused
 * (the caller found the engine off its clock), intervals pass unobserved. */
static void gateway_context_and_pause(void **state)
{
	struct rig *r = *state;
	struct fg_engine_totals t = { .have = ALL | FG_ET_GW_CONTEXT };
	enum fg_calib_source src;

	fg_calib_hist_scrape(&r->hist, r->calib, SEC, &t, -1);
	t.itl_sum += 2100 * 0.015, t.itl_count += 2100, t.iterations += 210,
		t.generation_tokens += 2100, t.prompt_tokens += 21000;
	t.prompt_len_sum += 21000, t.prompt_len_count += 20, t.gen_len_sum += 2100,
		t.gen_len_count += 20;
	t.prefill_sum += 20 * 0.05, t.prefill_count += 20;
	t.gw_output_tokens += 2100, t.gw_context_tokens += 10 * 200 * 200 + 10 * 10 * 2005;
	assert_int_equal(fg_calib_hist_scrape(&r->hist, r->calib, 3 * SEC, &t, -1), 2);
	const struct fg_calib_step *d = interval(r->calib, 0, &src);
	assert_near(d->batch, 10);
	assert_near(d->context, 10 * (400000 + 200500) / 2100.0);
	assert_near(d->prefill_tokens, 100);
	/* without the gateway's books: the requests' means */
	struct fg_calib_hist h2;
	fg_calib_hist_init(&h2);
	struct fg_engine_totals e = t;
	e.have = ALL;
	e.gw_output_tokens = e.gw_context_tokens = 0;
	fg_calib_hist_scrape(&h2, r->calib, 3 * SEC, &e, -1);
	e.itl_sum += 2100 * 0.015, e.itl_count += 2100, e.iterations += 210,
		e.generation_tokens += 2100, e.prompt_tokens += 21000;
	e.prompt_len_sum += 21000, e.prompt_len_count += 20, e.gen_len_sum += 2100,
		e.gen_len_count += 20;
	assert_int_equal(fg_calib_hist_scrape(&h2, r->calib, 5 * SEC, &e, -1), 1);
	assert_near(interval(r->calib, 2, &src)->context, 10 * 1102.5);

	r->hist.paused = true;
	t.itl_sum += 1, t.itl_count += 100, t.prompt_len_sum += 10, t.prompt_len_count += 1,
		t.gen_len_sum += 10, t.gen_len_count += 1, t.iterations += 10,
		t.generation_tokens += 100;
	assert_int_equal(fg_calib_hist_scrape(&r->hist, r->calib, 7 * SEC, &t, -1), 0);
	assert_int_equal(r->hist.paused_intervals, 1);
	assert_int_equal(r->calib->ilen, 3);
	fg_calib_drop_intervals(r->calib);
	assert_int_equal(r->calib->ilen, 0);
	assert_false(fg_calib_refit(r->calib, 8 * SEC)->valid);
}

/* A counter that went back is a restarted engine: no negative sample, a
 * new baseline, and the next interval from it is whole. */
static void restart_is_a_reset(void **state)
{
	struct rig *r = *state;
	struct fg_engine_totals t = { .have = ALL, .itl_sum = 50, .itl_count = 2000,
				      .prefill_sum = 30, .prefill_count = 100,
				      .prompt_len_sum = 1e5, .prompt_len_count = 100,
				      .gen_len_sum = 2e4, .gen_len_count = 100, .iterations = 900,
				      .prompt_tokens = 1e5, .generation_tokens = 2.1e4 };

	fg_calib_hist_scrape(&r->hist, r->calib, 10 * SEC, &t, 8);
	struct fg_engine_totals fresh = { .have = ALL, .itl_sum = 0.2, .itl_count = 10,
					  .prefill_sum = 0.1, .prefill_count = 1,
					  .prompt_len_sum = 500, .prompt_len_count = 1,
					  .gen_len_sum = 11, .gen_len_count = 1, .iterations = 11,
					  .prompt_tokens = 500, .generation_tokens = 11 };
	assert_int_equal(fg_calib_hist_scrape(&r->hist, r->calib, 12 * SEC, &fresh, 1), 0);
	assert_int_equal(r->hist.resets, 1);
	assert_int_equal(r->calib->ilen, 0);
	fresh.itl_sum += 2, fresh.itl_count += 100, fresh.prefill_sum += 0.2,
		fresh.prefill_count += 2, fresh.prompt_len_sum += 1000, fresh.prompt_len_count += 2,
		fresh.gen_len_sum += 100, fresh.gen_len_count += 2, fresh.iterations += 25,
		fresh.generation_tokens += 100, fresh.prompt_tokens += 1000;
	assert_int_equal(fg_calib_hist_scrape(&r->hist, r->calib, 14 * SEC, &fresh, 4), 2);
	enum fg_calib_source src;
	const struct fg_calib_step *d = interval(r->calib, 0, &src);
	assert_near(d->step_s, 0.02);
	assert_near(d->batch, 4);
	assert_near(d->prefill_tokens, 1000.0 / 25);
	assert_near(interval(r->calib, 1, &src)->step_s, 0.1);
}

/* Scrapes 20 ms apart (the fast pace) add up to an interval of a second;
 * one with too little in it for a minute is dropped. */
static void short_and_sparse(void **state)
{
	struct rig *r = *state;
	struct fg_engine_totals *t = &r->t;

	fg_calib_hist_scrape(&r->hist, r->calib, SEC, t, 2);
	for (int i = 1; i <= 49; i++) {
		t->itl_sum += 0.01 * 2, t->itl_count += 2, t->iterations += 1,
			t->generation_tokens += 2;
		assert_int_equal(fg_calib_hist_scrape(&r->hist, r->calib, SEC + i * (SEC / 50), t, 2),
				 0);
	}
	t->prompt_len_sum += 300, t->prompt_len_count += 1, t->gen_len_sum += 40,
		t->gen_len_count += 1;
	assert_int_equal(fg_calib_hist_scrape(&r->hist, r->calib, 2 * SEC, t, 2), 1);
	enum fg_calib_source src;
	assert_near(interval(r->calib, 0, &src)->step_s, 0.01);
	assert_near(interval(r->calib, 0, &src)->batch, 2);
	/* an idle engine: nothing for 61 s, then the interval starts again */
	assert_int_equal(fg_calib_hist_scrape(&r->hist, r->calib, 30 * SEC, t, 0), 0);
	assert_int_equal(fg_calib_hist_scrape(&r->hist, r->calib, 63 * SEC, t, 0), 0);
	assert_int_equal(r->hist.sparse, 1);
	assert_int_equal(r->hist.base_ns, 63 * SEC);
}

/* What the truth's engine exports over `dt`: `steps` steps of `batch`
 * sequences, `finished` requests of `prompt`-token prompts (each prefilled
 * alone in a step beside the batch) and `out`-token outputs. */
static void engine_runs(struct fg_engine_totals *t, const struct fg_cost_model *truth,
			double scale, double batch, double prompt, double out, double finished,
			double steps)
{
	double ctx = batch * (prompt + out / 2);
	double per_step = finished * prompt / steps;
	double step = fg_decode_step_batch_s(truth, batch, ctx) + fg_prefill_s(truth, per_step);
	double prefill = fg_decode_step_batch_s(truth, batch, ctx) + fg_prefill_s(truth, prompt);

	t->itl_sum += batch * steps * step * scale;
	t->itl_count += batch * steps;
	t->prefill_sum += finished * prefill * scale;
	t->prefill_count += finished;
	t->prompt_len_sum += finished * prompt;
	t->prompt_len_count += finished;
	t->gen_len_sum += finished * out;
	t->gen_len_count += finished;
	t->iterations += steps;
	t->generation_tokens += batch * steps;
	t->prompt_tokens += finished * prompt;
	t->cache_queries += finished * prompt;
}

/* A run of varied load: batch 4-48, prompts 200-3,200, outputs 20-320. */
static void engine_load(struct rig *r, uint64_t t0, int intervals, double scale)
{
	fg_calib_hist_scrape(&r->hist, r->calib, t0, &r->t, -1);
	for (int i = 1; i <= intervals; i++) {
		engine_runs(&r->t, &r->truth, scale, 4 + (i * 7) % 45, 200 + (i * 1300) % 3000,
			    20 + (i * 110) % 300, 2 + i % 3, 200);
		fg_calib_hist_scrape(&r->hist, r->calib, t0 + (uint64_t)i * 2 * SEC, &r->t, -1);
	}
}

static void histograms_alone_fit_the_truth(void **state)
{
	struct rig *r = *state;
	struct fg_cost_model t = r->truth, a = r->assumed;

	engine_load(r, SEC, FG_CALIB_MIN_INTERVALS - 1, 1);
	assert_false(fg_calib_refit(r->calib, 20 * SEC)->valid); /* 4 of each: not yet */
	engine_load(r, 20 * SEC, 30, 1);
	const struct fg_calib_fit *f = fg_calib_refit(r->calib, 90 * SEC);
	assert_true(f->valid);
	assert_false(f->bounded);
	assert_int_equal(f->used[FG_CALIB_SRC_STREAM], 0);
	assert_int_equal(f->used[FG_CALIB_SRC_ENGINE_DECODE], 34);
	assert_int_equal(f->used[FG_CALIB_SRC_ENGINE_PREFILL], 34);
	assert_near(f->weight_share[1], 1);
	assert_rel(f->prompt_token_s, t.prompt_token_s, 0.01);
	assert_rel(f->cm.output_weight, t.output_weight, 0.01);
	assert_rel(f->cm.replica_units_per_s, t.replica_units_per_s, 0.01);
	/* batch, prompt and output varied apart: every term is measured */
	assert_true(f->prompt_identified && f->step_identified && f->context_identified &&
		    f->per_seq_identified);
	/* the policy was far off: the fit is not it */
	assert_true(f->cm.output_weight > a.output_weight * 1.1 ||
		    f->cm.output_weight < a.output_weight / 1.1);
}

/* 3,000 steps the streams saw of the truth over 30 s: batch 1-48, varied
 * contexts, a prefill every fourth step. */
static void streams_of_the_truth(struct rig *r)
{
	for (int i = 0; i < 3000; i++) {
		double batch = 1 + i % 48, ctx = batch * (300 + (i * 37) % 3000);
		double prefill = i % 4 ? 0 : 50 + (i * 131) % 4000;
		fg_calib_add_step(r->calib, SEC + (uint64_t)i * (SEC / 100), batch, ctx, prefill,
				  fg_decode_step_batch_s(&r->truth, batch + (prefill > 0), ctx) +
					  fg_prefill_s(&r->truth, prefill));
	}
}

/* Steps the streams saw of the truth, and histograms of an engine 1.5x
 * slower (two views that disagree): each source gets half the fit, so the
 * measured decode step lands between them, not on either. */
static void neither_source_swamps(void **state)
{
	struct rig *r = *state;
	struct fg_cost_model t = r->truth;
	struct fg_calib *c = r->calib;

	streams_of_the_truth(r);
	const struct fg_calib_fit *f = fg_calib_refit(c, 31 * SEC);
	assert_near(f->weight_share[0], 1);
	assert_rel(f->cm.decode_step_s, t.decode_step_s, 0.01);
	/* 3 intervals (6 observations) against 3,000 steps: the engine's share
	 * is 6/10 of a half, against the streams' whole half */
	engine_load(r, 31 * SEC, 3, 1.5);
	f = fg_calib_refit(c, 40 * SEC);
	assert_near(f->weight_share[1], 0.3 / 0.8);
	engine_load(r, 40 * SEC, 40, 1.5);
	f = fg_calib_refit(c, 125 * SEC);
	assert_true(f->valid);
	assert_near(f->weight_share[0], 0.5);
	assert_near(f->weight_share[1], 0.5);
	assert_int_equal(f->used[FG_CALIB_SRC_STREAM] + f->trimmed, 3000);
	/* read at a batch both saw: two views 1.5x apart fit no one slope, so
	 * the per-sequence term is not measured (pinned) and the reference
	 * batch (128, past both sources' 1-48) is not where they meet */
	assert_false(f->per_seq_identified);
	double ratio = fg_decode_step_batch_s(&f->cm, 24, 24 * 1700.0) /
		       fg_decode_step_batch_s(&t, 24, 24 * 1700.0);
	assert_true(ratio > 1.1 && ratio < 1.4);
	/* and the other way round: 40 intervals do not drown 3 steps' worth
	 * of a source that has hardly started (3/256 of a half) */
	struct fg_calib *c2 = test_malloc(sizeof(*c2));
	fg_calib_init(c2, &r->assumed);
	for (uint32_t i = 0; i < c->ilen; i++) {
		enum fg_calib_source src;
		const struct fg_calib_step *o = interval(c, i, &src);
		fg_calib_add_interval(c2, o->at_ns, src, o->batch, o->context, o->prefill_tokens,
				      o->step_s, 1);
	}
	for (int i = 0; i < 3; i++)
		fg_calib_add_step(c2, 120 * SEC, 8, 8000, 0, 0.5);
	f = fg_calib_refit(c2, 125 * SEC);
	assert_near(f->weight_share[0], (0.5 * 3 / FG_CALIB_MIN_STEPS) /
						(0.5 * 3 / FG_CALIB_MIN_STEPS + 0.5));
	assert_rel(f->cm.decode_step_s, 1.5 * t.decode_step_s, 0.03);
	test_free(c2);
}

/* The same steps seen twice do not count twice: histograms of an engine
 * 1.5x slower than the steps the streams show, whose tokens the streams
 * all showed, weigh nothing (the fit is the streams'); when the streams
 * showed half of them, they weigh half their half. */
static void steps_the_streams_showed_count_once(void **state)
{
	struct rig *r = *state;
	struct fg_cost_model t = r->truth;
	struct fg_calib *c = r->calib;

	streams_of_the_truth(r);
	r->t.have = ALL | FG_ET_GW_CONTEXT;
	for (double shown = 1; shown >= 0.5; shown -= 0.5) {
		fg_calib_drop_intervals(c);
		fg_calib_hist_init(&r->hist);
		uint64_t t0 = (shown == 1 ? 31 : 120) * SEC;
		fg_calib_hist_scrape(&r->hist, c, t0, &r->t, -1);
		for (int i = 1; i <= 40; i++) {
			double before = r->t.itl_count;
			engine_runs(&r->t, &r->truth, 1.5, 4 + (i * 7) % 45, 200 + (i * 1300) % 3000,
				    20 + (i * 110) % 300, 2 + i % 3, 200);
			r->t.gw_streamed_tokens += shown * (r->t.itl_count - before);
			fg_calib_hist_scrape(&r->hist, c, t0 + (uint64_t)i * 2 * SEC, &r->t, -1);
		}
		const struct fg_calib_fit *f = fg_calib_refit(c, t0 + 85 * SEC);
		assert_true(f->valid);
		if (shown == 1) {
			assert_near(f->weight_share[1], 0);
			assert_rel(f->cm.decode_step_s, t.decode_step_s, 0.01);
		} else {
			assert_near(f->weight_share[1], 0.25 / 0.75);
			/* at a batch both saw (two views 1.5x apart fit no one
			 * per-sequence slope: it is pinned, neither_source_swamps) */
			assert_true(fg_decode_step_batch_s(&f->cm, 24, 24 * 1700.0) >
				    fg_decode_step_batch_s(&t, 24, 24 * 1700.0) * 1.05);
		}
	}
}

/* A sick engine's histograms: zero times and stalls are refused, times a
 * thousand times too short or fifty times too long are boxed, and the
 * followed prices stay within the floor and ceiling. */
static void sick_engine_bounded(void **state)
{
	struct rig *r = *state;
	struct fg_cost_model a = r->assumed;
	struct fg_calib *c = r->calib;

	/* no time at all between tokens, and none to prefill */
	engine_load(r, SEC, 10, 0);
	assert_int_equal(c->ilen, 0);
	assert_int_equal(r->hist.refused, 20);
	assert_false(fg_calib_refit(c, 30 * SEC)->valid);
	/* every step 12 s: stalls, refused too */
	struct fg_engine_totals *t = &r->t;
	fg_calib_hist_scrape(&r->hist, c, 30 * SEC, t, -1);
	t->itl_sum += 12 * 100, t->itl_count += 100, t->prefill_sum += 24, t->prefill_count += 2,
		t->prompt_len_sum += 2000, t->prompt_len_count += 2, t->gen_len_sum += 100,
		t->gen_len_count += 2, t->iterations += 25, t->generation_tokens += 100;
	fg_calib_hist_scrape(&r->hist, c, 32 * SEC, t, -1);
	assert_int_equal(c->ilen, 0);
	assert_int_equal(r->hist.refused, 22);

	for (int k = 0; k < 2; k++) {
		double scale = k ? 50 : 1e-3;
		struct fg_calib_follow fl;
		fg_calib_init(c, &a);
		fg_calib_hist_init(&r->hist);
		fg_calib_follow_init(&fl, &a, 40 * SEC);
		engine_load(r, 40 * SEC, 30, scale);
		const struct fg_calib_fit *f = fg_calib_refit(c, 110 * SEC);
		assert_true(f->valid);
		assert_true(f->bounded);
		assert_true(f->prompt_token_s <= a.prompt_token_s * FG_CALIB_BOX * (1 + 1e-12));
		assert_true(f->prompt_token_s >= a.prompt_token_s / FG_CALIB_BOX * (1 - 1e-12));
		assert_true(f->step_fixed_s <= fg_decode_step_batch_s(&a, 0, 0) * FG_CALIB_BOX *
							   (1 + 1e-12));
		assert_true(f->step_fixed_s >= fg_decode_step_batch_s(&a, 0, 0) / FG_CALIB_BOX *
							   (1 - 1e-12));
		assert_true(isfinite(f->cm.output_weight) && f->cm.output_weight > 0);
		/* an hour of following: at the floor or ceiling, not past it */
		for (uint64_t s = 111; s < 111 + 3600; s += 60)
			fg_calib_follow_step(&fl, f, s * SEC);
		for (int i = 0; i < 3; i++) {
			assert_true(fl.scale[i] >= FG_CALIB_FLOOR * (1 - 1e-9));
			assert_true(fl.scale[i] <= FG_CALIB_CEILING * (1 + 1e-9));
		}
		assert_true(fl.applied.prompt_token_s >= a.prompt_token_s * FG_CALIB_FLOOR * (1 - 1e-9));
		assert_true(fl.applied.prompt_token_s <= a.prompt_token_s * FG_CALIB_CEILING * (1 + 1e-9));
		/* held by the box, the prompt-token time is bounded, not
		 * measured: no price follows it */
		assert_false(f->prompt_identified);
		for (int i = 0; i < 3; i++)
			assert_rel(fl.scale[i], 1, 1e-12);
	}
}

/* Histograms alone of an engine near its cap: the batch moves a little
 * and every sequence holds the same KV, so the KV is the batch times a
 * constant and its term cannot be told from the per-sequence one. The fit
 * says so (whatever its ridge settled on), pins it at the policy's, and
 * an hour of following leaves the price per token of context at the
 * policy's while the prompt-token time, measured, is followed. */
static void collinear_histograms_hold_the_kv_price(void **state)
{
	struct rig *r = *state;
	struct fg_cost_model t = r->truth, a = r->assumed;
	struct fg_calib_follow fl;

	fg_calib_follow_init(&fl, &a, SEC);
	fg_calib_hist_scrape(&r->hist, r->calib, SEC, &r->t, -1);
	for (int i = 1; i <= 40; i++) {
		/* 1% of jitter, as a real engine's means have */
		double jitter = 1 + 0.01 * sin(i * 2.4);
		engine_runs(&r->t, &r->truth, jitter, 112 + (i * 5) % 17, 1400, 600, 2 + i % 3,
			    200);
		fg_calib_hist_scrape(&r->hist, r->calib, SEC + (uint64_t)i * 2 * SEC, &r->t, -1);
	}
	const struct fg_calib_fit *f = fg_calib_refit(r->calib, 81 * SEC);
	assert_true(f->valid);
	assert_int_equal(f->used[FG_CALIB_SRC_STREAM], 0);
	assert_false(f->context_identified);
	assert_true(f->prompt_identified);
	assert_rel(f->step_per_context_s, a.output_s_per_context, 1e-3);
	assert_rel(f->prompt_token_s, t.prompt_token_s, 0.02);
	/* what the histograms do measure: the step at the batch they saw */
	assert_rel(fg_decode_step_batch_s(&f->cm, 120, 120 * 1700.0),
		   fg_decode_step_batch_s(&t, 120, 120 * 1700.0), 0.02);
	for (uint64_t s = 81; s <= 81 + 3600; s += 60)
		fg_calib_follow_step(&fl, f, s * SEC);
	assert_rel(fl.scale[2], 1, 1e-12);
	assert_rel(fl.applied.output_s_per_context / fl.applied.prompt_token_s,
		   a.output_s_per_context / a.prompt_token_s, 1e-9);
	assert_rel(fl.applied.prompt_token_s, t.prompt_token_s, 0.02);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(deltas_by_hand, rig_up, rig_down),
		cmocka_unit_test_setup_teardown(gateway_context_and_pause, rig_up, rig_down),
		cmocka_unit_test_setup_teardown(restart_is_a_reset, rig_up, rig_down),
		cmocka_unit_test_setup_teardown(short_and_sparse, rig_up, rig_down),
		cmocka_unit_test_setup_teardown(histograms_alone_fit_the_truth, rig_up, rig_down),
		cmocka_unit_test_setup_teardown(neither_source_swamps, rig_up, rig_down),
		cmocka_unit_test_setup_teardown(steps_the_streams_showed_count_once, rig_up, rig_down),
		cmocka_unit_test_setup_teardown(sick_engine_bounded, rig_up, rig_down),
		cmocka_unit_test_setup_teardown(collinear_histograms_hold_the_kv_price, rig_up,
						rig_down),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
