/* test_calibration.c — the engine's measured replica time
 * (policy/calibration.c) and the prices that follow it
 * (policy/calib_follow.c): the fit recovers a known truth from noisy
 * synthetic observations, stays in its box, drops garbage and stalls,
 * slides; the followed prices move at a bounded rate within their floor
 * and ceiling, and report a sharp change once. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>

#include "selftests/unit/calib_models.h"
#include "policy/calib_follow.h"
#include "policy/calibration.h"
#include "policy/cost_model.h"
#include "policy/policy.h"
#include "selftests/unit/xorshift.h"


/* The usual case: a fit initialised on the assumed model beside its truth;
 * freed after the test, also when an assertion fails. */
struct calib_rig {
	struct fg_cost_model assumed, truth;
	struct fg_calib *calib;
};

static int rig_up(void **state)
{
	struct calib_rig *r = test_malloc(sizeof(*r));

	models(&r->assumed, &r->truth);
	r->calib = test_malloc(sizeof(*r->calib));
	fg_calib_init(r->calib, &r->assumed);
	*state = r;
	return 0;
}

static int rig_down(void **state)
{
	struct calib_rig *r = *state;

	test_free(r->calib);
	test_free(r);
	return 0;
}

/* xorshift and Box-Muller: repeatable noise */
static uint64_t rng = 88172645463325252ull;
static double unif(void)
{
	return (double)(fg_xorshift64(&rng) >> 11) / 9007199254740992.0;
}
static double gauss(void)
{
	double u = unif(), v = unif();
	return sqrt(-2 * log(u > 0 ? u : 1e-300)) * cos(2 * M_PI * v);
}

/* What a gateway in front of `truth` sees: steps of its batch, a quarter
 * of them prefilling a prompt beside the decode (vLLM's mixed step), with
 * 0.3 ms of jitter. */
static void observe(struct fg_calib *c, const struct fg_cost_model *truth, uint64_t t0, int n,
		    double step_scale)
{
	for (int i = 0; i < n; i++) {
		uint64_t now = t0 + (uint64_t)i * (SEC / 100);
		double batch = 1 + floor(unif() * 48);
		double ctx = batch * (300 + unif() * 3000);
		double prefill = i % 4 ? 0 : 50 + floor(unif() * 4000);
		double step = fg_decode_step_batch_s(truth, batch + (prefill > 0), ctx) +
			      fg_prefill_s(truth, prefill);
		fg_calib_add_step(c, now, batch, ctx, prefill, step * step_scale + 3e-4 * gauss());
	}
}

static void cost_model_identity(void **state)
{
	(void)state;
	struct fg_cost_model a, t, back, priced;
	models(&a, &t);

	/* the assumption put back through the calibrated constructor is itself */
	fg_cost_model_calibrated(&back, &a, a.prompt_token_s, fg_decode_step_batch_s(&a, 0, 0), 0,
				 a.output_s_per_context);
	assert_rel(back.output_weight, a.output_weight, 1e-12);
	assert_rel(back.decode_step_s, a.decode_step_s, 1e-12);
	assert_true(fabs(back.step_overhead_s) < 1e-15);
	/* and the priced constructor inverts derive() */
	fg_cost_model_priced(&priced, &a, t.prompt_token_s, t.output_weights_share_s,
			     t.output_s_per_context, t.seq_overhead_s);
	assert_rel(priced.output_weight, t.output_weight, 1e-12);
	assert_rel(priced.step_overhead_s, t.step_overhead_s, 1e-9);
	assert_rel(fg_decode_step_batch_s(&priced, 7, 9000), fg_decode_step_batch_s(&t, 7, 9000), 1e-12);
	/* a policy's model has no overheads, so the batch implied by context is moot */
	assert_rel(fg_decode_step_s(&a, 5 * 1700.0), fg_decode_step_batch_s(&a, 5, 5 * 1700.0), 1e-12);
	/* the truth's output weight: (3 ms + 128 x 20 us + 17.6 GB / 2.077 TB/s
	 * + 128 x 1700 x 81,920 B / 2.077 TB/s) / 128 / 46.9 us */
	assert_rel(t.output_weight, (3e-3 + 128 * 20e-6 + (17.6375e9 + 128 * 1700 * 81920.0) /
				     (3.35e12 * 0.62)) / 128 / t.prompt_token_s, 1e-3);
	assert_rel(fg_cost_model_prefill_mfu_ratio(&t, &a), 0.38 / 0.50, 1e-12);
	assert_rel(fg_cost_model_decode_mbu_ratio(&t, &a), 0.62 / 0.75, 1e-12);
}

static void fit_converges_on_noisy_truth(void **state)
{
	struct calib_rig *r = *state;
	struct fg_cost_model a = r->assumed, t = r->truth;
	struct fg_calib *c = r->calib;

	observe(c, &t, SEC, 2000, 1);
	const struct fg_calib_fit *f = fg_calib_refit(c, 21 * SEC);
	assert_true(f->valid);
	assert_false(f->bounded);
	assert_rel(f->prompt_token_s, t.prompt_token_s, 0.02);
	assert_rel(f->step_per_context_s, t.output_s_per_context, 0.02);
	assert_rel(f->step_fixed_s, fg_decode_step_batch_s(&t, 0, 0), 0.05);
	assert_rel(f->cm.output_weight, t.output_weight, 0.02);
	assert_rel(f->cm.replica_units_per_s, t.replica_units_per_s, 0.02);
	assert_rel(fg_cost_model_decode_mbu_ratio(&f->cm, &a), 0.62 / 0.75, 0.02);
	/* the assumption was 1.7x off the truth: the fit is not it */
	assert_true(f->cm.output_weight > a.output_weight * 1.1 ||
		    f->cm.output_weight < a.output_weight / 1.1);
	assert_rel(f->rms_s, 3e-4, 0.2);
	assert_true(f->prompt_identified && f->context_identified && f->per_seq_identified &&
		    f->step_identified);
	assert_true(f->prompt_token_se_s > 0 && f->prompt_token_se_s < 0.01 * f->prompt_token_s);
}

static void too_few_is_the_assumption(void **state)
{
	struct calib_rig *r = *state;
	struct fg_cost_model a = r->assumed, t = r->truth;
	struct fg_calib *c = r->calib;

	observe(c, &t, SEC, FG_CALIB_MIN_STEPS - 1, 1);
	const struct fg_calib_fit *f = fg_calib_refit(c, 2 * SEC);
	assert_false(f->valid);
	assert_rel(f->cm.output_weight, a.output_weight, 1e-12);
}

static void stalls_and_outliers_trimmed(void **state)
{
	struct calib_rig *r = *state;
	struct fg_cost_model t = r->truth;
	struct fg_calib *c = r->calib;

	observe(c, &t, SEC, 2000, 1);
	/* 4% of steps delayed 20x (a GC pause, a preemption's recompute) */
	for (int i = 0; i < 80; i++)
		fg_calib_add_step(c, 20 * SEC, 8, 8 * 2000, 0, 20 * fg_decode_step_batch_s(&t, 8, 16000));
	const struct fg_calib_fit *f = fg_calib_refit(c, 21 * SEC);
	assert_true(f->valid);
	assert_true(f->trimmed >= 80);
	assert_rel(f->cm.output_weight, t.output_weight, 0.03);
}

static void garbage_rejected(void **state)
{
	struct calib_rig *r = *state;
	struct fg_cost_model a = r->assumed;
	struct fg_calib *c = r->calib;

	assert_int_equal(fg_calib_add_step(c, SEC, NAN, 100, 0, 0.01), FG_CALIB_BAD_NUMBER);
	assert_int_equal(fg_calib_add_step(c, SEC, 4, -1, 0, 0.01), FG_CALIB_BAD_NUMBER);
	assert_int_equal(fg_calib_add_step(c, SEC, 4, 100, -5, 0.01), FG_CALIB_BAD_NUMBER);
	assert_int_equal(fg_calib_add_step(c, SEC, 4, 100, 0, 0), FG_CALIB_BAD_NUMBER);
	assert_int_equal(fg_calib_add_step(c, SEC, 0, 100, 0, 0.01), FG_CALIB_BAD_NUMBER);
	assert_int_equal(fg_calib_add_step(c, SEC, 4, 100, 0, INFINITY), FG_CALIB_BAD_NUMBER);
	assert_int_equal(fg_calib_add_step(c, SEC, 4, 100, NAN, 0.01), FG_CALIB_BAD_NUMBER);
	assert_int_equal(fg_calib_add_step(c, SEC, 4, 100, 0, 11), FG_CALIB_OUT_OF_RANGE);
	assert_int_equal(fg_calib_add_step(c, SEC, 4, 1e12, 0, 0.01), FG_CALIB_OUT_OF_RANGE);
	assert_int_equal(fg_calib_add_step(c, SEC, 4, 100, 1e12, 0.01), FG_CALIB_OUT_OF_RANGE);
	assert_int_equal(fg_calib_add_step(c, SEC, 2e6, 100, 0, 0.01), FG_CALIB_OUT_OF_RANGE);
	assert_int_equal(c->rejected, 11);
	assert_int_equal(c->len, 0);
	assert_int_equal(fg_calib_add_step(c, SEC, 4, 100, 0, 0.01), FG_CALIB_TAKEN);
	assert_int_equal(c->len, 1);
	/* nothing but garbage: no fit, the assumption */
	assert_false(fg_calib_refit(c, 2 * SEC)->valid);
	assert_rel(c->fit.cm.output_weight, a.output_weight, 1e-12);
}

static void box_holds_a_sick_engine(void **state)
{
	struct calib_rig *r = *state;
	struct fg_cost_model a = r->assumed, t = r->truth;
	struct fg_calib *c = r->calib;

	observe(c, &t, SEC, 2000, 50); /* everything 50x slower */
	const struct fg_calib_fit *f = fg_calib_refit(c, 21 * SEC);
	assert_true(f->valid);
	assert_true(f->bounded);
	assert_true(f->prompt_token_s <= a.prompt_token_s * FG_CALIB_BOX * (1 + 1e-12));
	assert_true(f->step_per_context_s <= a.output_s_per_context * FG_CALIB_BOX * (1 + 1e-12));
	assert_true(f->step_fixed_s <= fg_decode_step_batch_s(&a, 0, 0) * FG_CALIB_BOX * (1 + 1e-12));
	assert_true(isfinite(f->cm.output_weight) && f->cm.output_weight > 0);
}

static void window_slides(void **state)
{
	struct calib_rig *r = *state;
	struct fg_cost_model t = r->truth;
	struct fg_calib *c = r->calib;

	observe(c, &t, SEC, 2000, 2);            /* an engine twice as slow ... */
	observe(c, &t, 400 * SEC, 2000, 1);      /* ... replaced 6 minutes later */
	const struct fg_calib_fit *f = fg_calib_refit(c, 421 * SEC);
	assert_true(f->valid);
	assert_int_equal(c->len, 2000);
	assert_rel(f->cm.output_weight, t.output_weight, 0.02);
	assert_rel(f->prompt_token_s, t.prompt_token_s, 0.02);
}

static void follow_rate_floor_ceiling(void **state)
{
	(void)state;
	struct fg_cost_model a, t;
	struct fg_calib_follow fl;
	struct fg_calib_fit fit = { .valid = true, .prompt_identified = true,
				    .step_identified = true, .context_identified = true };
	models(&a, &t);

	/* a measurement 4x dearer in every term: a minute moves 1.25x, no more */
	fg_cost_model_priced(&fit.cm, &a, a.prompt_token_s * 4, a.output_weights_share_s * 16,
			     a.output_s_per_context * 16, 0);
	fg_calib_follow_init(&fl, &a, 0);
	assert_true(fg_calib_follow_step(&fl, &fit, 60 * SEC)); /* a sharp change, reported */
	assert_rel(fl.applied.prompt_token_s, a.prompt_token_s * 1.25, 1e-9);
	assert_rel(fl.applied.output_weight, a.output_weight * 1.25, 1e-9);
	assert_rel(fl.applied.replica_units_per_s, a.replica_units_per_s / 1.25, 1e-9);
	assert_false(fg_calib_follow_step(&fl, &fit, 61 * SEC)); /* once */
	/* an hour later it sits on the ceiling: 2x the policy's */
	fg_calib_follow_step(&fl, &fit, 3600 * SEC);
	assert_rel(fl.applied.prompt_token_s, a.prompt_token_s * FG_CALIB_CEILING, 1e-9);
	assert_rel(fl.applied.output_weight, a.output_weight * FG_CALIB_CEILING, 1e-9);
	assert_rel(fg_output_token_s(&fl.applied, 40000) / fl.applied.prompt_token_s,
		   FG_CALIB_CEILING * fg_output_token_s(&a, 40000) / a.prompt_token_s, 1e-9);
	/* no valid fit: the prices hold */
	struct fg_calib_fit none = { .valid = false };
	fg_calib_follow_step(&fl, &none, 7200 * SEC);
	assert_rel(fl.applied.output_weight, a.output_weight * FG_CALIB_CEILING, 1e-9);
	/* an engine measuring near-free: the floor, however long it lasts */
	fg_cost_model_priced(&fit.cm, &a, a.prompt_token_s / 100, a.output_weights_share_s / 1e4,
			     a.output_s_per_context / 1e4, 0);
	assert_true(fg_calib_follow_step(&fl, &fit, 30000 * SEC));
	assert_rel(fl.applied.prompt_token_s, a.prompt_token_s * FG_CALIB_FLOOR, 1e-9);
	assert_rel(fl.applied.output_weight, a.output_weight * FG_CALIB_FLOOR, 1e-9);
	/* within the bounds it lands on the measurement itself */
	fg_calib_follow_step(&fl, &(struct fg_calib_fit){ .valid = true, .prompt_identified = true,
							    .step_identified = true,
							    .context_identified = true, .cm = t },
			     40000 * SEC);
	assert_rel(fl.applied.output_weight, t.output_weight, 1e-9);
	assert_rel(fl.applied.prompt_token_s, t.prompt_token_s, 1e-9);
	assert_rel(fg_decode_step_batch_s(&fl.applied, 128, 128 * 1700.0), t.decode_step_s, 1e-9);
	/* a KV term the fit could not measure holds; the rest still follow */
	struct fg_calib_follow f2;
	struct fg_calib_fit vague = { .valid = true, .prompt_identified = true,
				      .step_identified = true, .cm = t };
	fg_calib_follow_init(&f2, &a, 0);
	fg_calib_follow_step(&f2, &vague, 3600 * SEC);
	assert_rel(f2.applied.output_s_per_context / f2.applied.prompt_token_s,
		   a.output_s_per_context / a.prompt_token_s, 1e-9);
	assert_rel(f2.applied.prompt_token_s, t.prompt_token_s, 1e-9);
	assert_rel(f2.applied.output_weights_share_s / f2.applied.prompt_token_s,
		   t.output_weights_share_s / t.prompt_token_s, 1e-9);
}

/* Held (advise), the follow charges the policy's and starts from them
 * when prices are let follow: no jump at the switch. */
static void hold_then_follow_without_a_jump(void **state)
{
	(void)state;
	struct fg_cost_model a, t;
	struct fg_calib_follow fl;
	struct fg_calib_fit fit = { .valid = true, .prompt_identified = true,
				    .step_identified = true, .context_identified = true };
	models(&a, &t);
	fit.cm = t;
	fg_calib_follow_init(&fl, &a, 0);
	for (uint64_t s = 1; s <= 600; s++) {
		fg_calib_follow_step(&fl, &fit, s * SEC);
		fg_calib_follow_hold(&fl, s * SEC);
	}
	assert_rel(fl.applied.output_weight, a.output_weight, 1e-12);
	fg_calib_follow_step(&fl, &fit, 601 * SEC);
	assert_true(fl.applied.output_weight <= a.output_weight * exp(log1p(FG_CALIB_RATE_PER_MIN) / 60) * (1 + 1e-9));
}

/* Every sequence at the same context: the KV term is not told from the
 * per-sequence one, and the fit says so (the price holds, above). */
static void unvaried_context_not_identified(void **state)
{
	struct calib_rig *r = *state;
	struct fg_cost_model a = r->assumed, t = r->truth;
	struct fg_calib *c = r->calib;

	for (int i = 0; i < 2000; i++) {
		double batch = 1 + floor(unif() * 48), pre = i % 4 ? 0 : 50 + floor(unif() * 4000);
		double step = fg_decode_step_batch_s(&t, batch + (pre > 0), batch * 300) +
			      fg_prefill_s(&t, pre);
		fg_calib_add_step(c, SEC + (uint64_t)i * (SEC / 100), batch, batch * 300, pre,
				  step + 3e-4 * gauss());
	}
	const struct fg_calib_fit *f = fg_calib_refit(c, 21 * SEC);
	assert_true(f->valid);
	assert_false(f->context_identified);
	assert_true(f->prompt_identified);
	/* pinned at the policy's, the rest fitted around it */
	assert_rel(f->step_per_context_s, a.output_s_per_context, 1e-3);
	assert_rel(fg_decode_step_batch_s(&f->cm, 16, 16 * 300.0), fg_decode_step_batch_s(&t, 16, 16 * 300.0), 0.02);
	assert_rel(f->prompt_token_s, t.prompt_token_s, 0.02);
}

/* An engine whose KV costs a tenth of the policy's: measured well
 * (contexts vary apart from the batch, little jitter) but past the box's
 * 1/8x, so the
 * box holds it and it is not identified: the fit pins it at the policy's
 * and the followed price per token of context does not move. */
static void kv_term_on_its_box_not_identified(void **state)
{
	struct calib_rig *r = *state;
	struct fg_cost_model a = r->assumed, t = r->truth;
	struct fg_calib *c = r->calib;
	double fixed = fg_decode_step_batch_s(&t, 0, 0), per_ctx = a.output_s_per_context / 10;

	for (int i = 0; i < 2000; i++) {
		double batch = 1 + floor(unif() * 48), ctx = batch * (300 + unif() * 3000);
		double pre = i % 4 ? 0 : 50 + floor(unif() * 4000);
		double step = fixed + t.seq_overhead_s * (batch + (pre > 0)) + per_ctx * ctx +
			      fg_prefill_s(&t, pre);
		fg_calib_add_step(c, SEC + (uint64_t)i * (SEC / 100), batch, ctx, pre,
				  step + 3e-5 * gauss());
	}
	const struct fg_calib_fit *f = fg_calib_refit(c, 21 * SEC);
	assert_true(f->valid);
	/* its standard error alone would have called it measured */
	assert_true(f->step_per_context_se_s < FG_CALIB_MAX_REL_SE * per_ctx);
	assert_false(f->context_identified);
	assert_true(f->prompt_identified);
	assert_rel(f->step_per_context_s, a.output_s_per_context, 1e-3);
	assert_rel(f->prompt_token_s, t.prompt_token_s, 0.02);
	struct fg_calib_follow fl;
	fg_calib_follow_init(&fl, &a, 21 * SEC);
	fg_calib_follow_step(&fl, f, 3621 * SEC);
	assert_rel(fl.scale[2], 1, 1e-12);
	assert_rel(fl.applied.output_s_per_context / fl.applied.prompt_token_s,
		   a.output_s_per_context / a.prompt_token_s, 1e-9);
	assert_rel(fl.applied.prompt_token_s, t.prompt_token_s, 0.02); /* identified: followed */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(cost_model_identity),
		cmocka_unit_test_setup_teardown(fit_converges_on_noisy_truth, rig_up, rig_down),
		cmocka_unit_test_setup_teardown(too_few_is_the_assumption, rig_up, rig_down),
		cmocka_unit_test_setup_teardown(stalls_and_outliers_trimmed, rig_up, rig_down),
		cmocka_unit_test_setup_teardown(garbage_rejected, rig_up, rig_down),
		cmocka_unit_test_setup_teardown(box_holds_a_sick_engine, rig_up, rig_down),
		cmocka_unit_test_setup_teardown(window_slides, rig_up, rig_down),
		cmocka_unit_test(follow_rate_floor_ceiling),
		cmocka_unit_test_setup_teardown(unvaried_context_not_identified, rig_up, rig_down),
		cmocka_unit_test_setup_teardown(kv_term_on_its_box_not_identified, rig_up, rig_down),
		cmocka_unit_test(hold_then_follow_without_a_jump),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
