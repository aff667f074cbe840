/* test_calib_observer.c — engine steps as the proxy sees them
 * (agent/proxy/calib_observer.c): token arrivals grouped into steps give
 * the batch, its KV and the prompt prefilled beside it, with the duration
 * from the previous group; ambiguous steps (a coalesced read, a stream
 * missing, a non-streamed request at the engine) are not observed; mode
 * off observes nothing; under `on` the gateway's prices move, and the TPOT
 * cap is sized on the measured step at once. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>

#include "agent/proxy/calib_observer.h"
#include "policy/policy.h"

#define MS 1000000ull

static struct fg_policy policy;

static struct fg_pcal *setup(enum fg_calib_mode mode, struct fg_cost_model *cm)
{
	fg_policy_defaults(&policy);
	policy.agent.calibration = mode;
	fg_cost_model_init_policy(cm, &policy);
	return fg_pcal_new(&policy, cm, 0);
}

static struct fg_gw_request stream_of(double prompt)
{
	struct fg_gw_request r = { 0 };

	r.price.prompt_tokens = prompt;
	r.price.sequences = 1;
	r.price.prompts = 1;
	return r;
}

/* Steps of `step_ms` each: every running stream gets one token at the
 * step's end, 50 us apart as the relay reads them. */
static void run_steps(struct fg_pcal *pc, struct fg_pcal_req *q, int n, uint64_t *t,
		      double step_ms, int steps)
{
	for (int s = 0; s < steps; s++) {
		*t += (uint64_t)(step_ms * MS);
		for (int i = 0; i < n; i++)
			fg_pcal_output(pc, &q[i], q[i].out + 1, 0, *t + (uint64_t)i * 50000);
	}
}

static void steps_grouped_and_observed(void **state)
{
	(void)state;
	struct fg_cost_model cm;
	struct fg_pcal *pc = setup(FG_CALIB_ADVISE, &cm);
	struct fg_pcal_req q[4] = { 0 };
	uint64_t t = 0;

	for (int i = 0; i < 4; i++) {
		struct fg_gw_request r = stream_of(1000);
		fg_pcal_sent(pc, &q[i], &r, true);
	}
	/* all four prefilled in one step, then decode */
	t += 50 * MS;
	for (int i = 0; i < 4; i++)
		fg_pcal_output(pc, &q[i], 1, 0, t + (uint64_t)i * 50000);
	run_steps(pc, q, 4, &t, 10, 3);
	/* the first group has no predecessor; the second follows the
	 * prefill group; the third and fourth are pure decode */
	assert_int_equal(pc->steps_seen, 3); /* the last group is still open */
	assert_int_equal(pc->fit.len, 2);
	const struct fg_calib_step *o = &pc->fit.win[1];
	assert_true(fabs(o->step_s - 0.010) < 1e-9);
	assert_true(o->batch == 4);
	/* KV as the step began: 4 x (1000 prompt + 2 output) */
	assert_true(o->context == 4 * 1002.0);
	assert_true(o->prefill_tokens == 0);

	/* a fifth stream joins: its prefill (600 uncached, by the engine's
	 * count) shares a step with the four decoding */
	struct fg_pcal_req r5 = { 0 };
	struct fg_gw_request r = stream_of(700);
	fg_pcal_sent(pc, &r5, &r, true);
	t += 30 * MS;
	for (int i = 0; i < 4; i++)
		fg_pcal_output(pc, &q[i], q[i].out + 1, 0, t + (uint64_t)i * 50000);
	fg_pcal_output(pc, &r5, 1, 600, t + 250000);
	t += 10 * MS;
	for (int i = 0; i < 4; i++)
		fg_pcal_output(pc, &q[i], q[i].out + 1, 0, t + (uint64_t)i * 50000);
	fg_pcal_output(pc, &r5, 2, 600, t + 250000);
	run_steps(pc, q, 1, &t, 10, 1); /* closes the group before */
	o = &pc->fit.win[(pc->fit.head + pc->fit.len - 2) % FG_CALIB_WINDOW];
	assert_true(fabs(o->step_s - 0.030) < 1e-9);
	assert_true(o->batch == 4 && o->prefill_tokens == 600);
	o = &pc->fit.win[(pc->fit.head + pc->fit.len - 1) % FG_CALIB_WINDOW];
	assert_true(o->batch == 5 && o->prefill_tokens == 0);
	/* ... but the last group misses four of the five: not observed */
	uint64_t seen = pc->steps_observed;
	run_steps(pc, q, 1, &t, 10, 1);
	assert_int_equal(pc->steps_observed, seen);
	/* the cross-check: the engine's own mean inter-token time between two
	 * scrapes beside the proxy's steps over the same tokens */
	fg_pcal_engine_itl(pc, 1.0, 100);
	run_steps(pc, q, 4, &t, 10, 6);
	fg_pcal_engine_itl(pc, 1.0 + 24 * 0.0101, 124);
	assert_true(fabs(pc->engine_itl_s - 0.0101) < 1e-9);
	assert_true(fabs(pc->proxy_itl_s - 0.010) < 1e-9);
	/* an engine restart (its counters back to 0) clears the comparison */
	fg_pcal_engine_itl(pc, 0.1, 10);
	assert_true(pc->engine_itl_s == 0 && pc->proxy_itl_s == 0);
	fg_pcal_free(pc);
}

static void ambiguous_steps_not_observed(void **state)
{
	(void)state;
	struct fg_cost_model cm;
	struct fg_pcal *pc = setup(FG_CALIB_ADVISE, &cm);
	struct fg_pcal_req q[2] = { 0 }, opaque = { 0 };
	uint64_t t = 0;

	for (int i = 0; i < 2; i++) {
		struct fg_gw_request r = stream_of(100);
		fg_pcal_sent(pc, &q[i], &r, true);
		fg_pcal_output(pc, &q[i], 1, 0, t + (uint64_t)i * 50000);
	}
	run_steps(pc, q, 2, &t, 10, 4);
	uint64_t base = pc->steps_observed;
	assert_true(base >= 2);
	/* a coalesced read: two tokens at once */
	t += 10 * MS;
	fg_pcal_output(pc, &q[0], q[0].out + 2, 0, t);
	fg_pcal_output(pc, &q[1], q[1].out + 1, 0, t + 50000);
	run_steps(pc, q, 2, &t, 10, 1);
	assert_int_equal(pc->steps_observed, base + 1); /* the one before it, not the coalesced group */
	run_steps(pc, q, 2, &t, 10, 2);
	base = pc->steps_observed;
	/* a non-streamed request at the engine: nothing is observed while it is */
	struct fg_gw_request nr = stream_of(100);
	fg_pcal_sent(pc, &opaque, &nr, false);
	run_steps(pc, q, 2, &t, 10, 4);
	assert_int_equal(pc->steps_observed, base);
	fg_pcal_end(pc, &opaque);
	run_steps(pc, q, 2, &t, 10, 4);
	assert_true(pc->steps_observed >= base + 2);
	/* ends keep the books straight */
	fg_pcal_end(pc, &q[0]);
	fg_pcal_end(pc, &q[1]);
	assert_int_equal(pc->n_decode + pc->n_prefill + pc->n_opaque, 0);
	fg_pcal_free(pc);
}

static void off_observes_nothing_on_moves_prices(void **state)
{
	(void)state;
	struct fg_cost_model cm;
	struct fg_pcal *pc = setup(FG_CALIB_OFF, &cm);
	struct fg_pcal_req q = { 0 };
	struct fg_gw_request r = stream_of(100);
	uint64_t t = 0;

	fg_pcal_sent(pc, &q, &r, true);
	fg_pcal_output(pc, &q, 1, 0, 0);
	run_steps(pc, &q, 1, &t, 10, 10);
	assert_int_equal(pc->steps_seen, 0);
	assert_int_equal(pc->fit.len, 0);
	fg_pcal_free(pc);

	/* on: a fit twice the policy's step moves the gateway's prices,
	 * 1.25x in the first minute (contexts vary: every term measured) */
	struct fg_gateway *gw = calloc(1, sizeof(*gw));
	pc = setup(FG_CALIB_ON, &cm);
	gw->cm = cm;
	for (int i = 0; i < 400; i++) {
		double batch = 1 + i % 32, ctx = batch * (500 + (i * 37) % 3000), pre = i % 4 ? 0 : 2000;
		fg_calib_add_step(&pc->fit, (uint64_t)i * MS, batch, ctx, pre,
				  2 * fg_decode_step_batch_s(&cm, batch, ctx) + fg_prefill_s(&cm, pre));
	}
	fg_pcal_tick(pc, gw, 60000 * MS);
	assert_true(pc->fit.fit.valid);
	assert_true(fabs(gw->cm.output_weight / cm.output_weight - 1.25) < 1e-6);
	assert_int_equal(pc->sharp_changes, 1);
	fg_pcal_free(pc);
	free(gw);
}

/* A TPOT tier: under `on` the cap is sized on the measured step from the
 * first valid fit (the engine is 1.5x slower plus 3 ms a step: the cap
 * shrinks), while the charged prices move 1.25x in the first minute; a
 * reload to advise puts the cap back on the policy's model. */
static void on_sizes_the_tpot_cap_on_the_measured_step_at_once(void **state)
{
	(void)state;
	struct fg_cost_model cm;
	struct fg_pcal *pc = setup(FG_CALIB_ON, &cm);
	struct fg_tier *lat = &policy.tiers[policy.n_tiers++];
	snprintf(lat->name, sizeof(lat->name), "latency");
	lat->weight = 1;
	lat->max_context = 32768;
	lat->burst_s = 60;
	lat->max_queue_s = 60;
	lat->tpot_p99_ms = 15;
	lat->kv_cap_tokens = 8192;
	struct fg_tenant *t = fg_policy_add_tenant(&policy);
	assert_non_null(t);
	snprintf(t->name, sizeof(t->name), "lat");
	t->tier = policy.n_tiers - 1;
	t->units_per_s = 1000;
	t->burst_s = 60;
	struct fg_gateway *gw = calloc(1, sizeof(*gw));
	fg_gw_init(gw, &policy, 0, 0);
	uint64_t cap_assumed = gw->tpot.cap_tokens;
	assert_true(cap_assumed > 0);

	/* nothing observed yet: the policy's */
	fg_pcal_tick(pc, gw, 0);
	assert_false(pc->step_measured);
	assert_int_equal(gw->tpot.cap_tokens, cap_assumed);
	for (int i = 0; i < 400; i++) {
		double batch = 1 + i % 32, ctx = batch * (500 + (i * 37) % 3000), pre = i % 4 ? 0 : 2000;
		fg_calib_add_step(&pc->fit, (uint64_t)i * MS, batch, ctx, pre,
				  0.003 + 1.5 * (fg_decode_step_batch_s(&cm, batch, ctx) +
						 fg_prefill_s(&cm, pre)));
	}
	fg_pcal_tick(pc, gw, 60000 * MS);
	const struct fg_calib_fit *f = &pc->fit.fit;
	assert_true(f->valid && !f->bounded);
	assert_true(pc->step_measured);
	assert_memory_equal(&gw->step_cm, &f->cm, sizeof(f->cm));
	assert_int_equal(gw->tpot.cap_tokens, fg_tpot_context_within(&f->cm, 0.015, cm.ref_context));
	assert_true(gw->tpot.cap_tokens < cap_assumed * 0.8);
	/* the step the cap allows is the engine's, not the policy's */
	double step = 0.003 + 1.5 * fg_decode_step_batch_s(&cm, 1, (double)gw->tpot.cap_tokens);
	assert_true(fabs(fg_batch_step_s(&gw->step_cm, 1, (double)gw->tpot.cap_tokens, 0) - step) <
		    1e-4);
	/* prices: at most 1.25x in the minute, not the measured 1.5x */
	assert_true(fabs(gw->cm.prompt_token_s / cm.prompt_token_s - 1.25) < 1e-6);

	/* advise: the policy's model for the cap, at the reload */
	policy.agent.calibration = FG_CALIB_ADVISE;
	fg_gw_reload(gw, &policy, 61000 * MS);
	fg_pcal_apply_policy(pc, &policy, gw, false, 61000 * MS);
	assert_false(pc->step_measured);
	assert_int_equal(gw->tpot.cap_tokens, cap_assumed);
	fg_pcal_tick(pc, gw, 62000 * MS);
	assert_int_equal(gw->tpot.cap_tokens, cap_assumed);
	/* on again: measured at once, from the observations kept */
	policy.agent.calibration = FG_CALIB_ON;
	fg_gw_reload(gw, &policy, 63000 * MS);
	fg_pcal_apply_policy(pc, &policy, gw, false, 63000 * MS);
	assert_true(pc->step_measured);
	assert_true(gw->tpot.cap_tokens < cap_assumed * 0.8);
	fg_pcal_free(pc);
	fg_gw_free(gw);
	free(gw);
	fg_policy_release(&policy);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(steps_grouped_and_observed),
		cmocka_unit_test(ambiguous_steps_not_observed),
		cmocka_unit_test(off_observes_nothing_on_moves_prices),
		cmocka_unit_test(on_sizes_the_tpot_cap_on_the_measured_step_at_once),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
