/* test_price_engine.c — the cost model's prices and the simulator's timings
 * agree: at the reference batch, the replica time the engine (sim/engine.c)
 * spends on a batch of requests is what policy/cost_model.c bills them.
 *
 * A decode step of the reference batch lasts (weights + the batch's summed
 * context x kv_bytes) / (gpus x hbm x mbu), which is the sum over its
 * sequences of t(context); so the two agree exactly when every decode step
 * holds the reference batch. The engine gets a prefill budget large enough to
 * admit all 128 requests in one step and equal output lengths, so all of
 * them decode in lockstep to the end. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <cmocka.h>

#include "policy/cost_model.h"
#include "policy/policy.h"
#include "sim/engine.h"

#define BATCH 128

struct run_stats {
	uint32_t decode_steps_full, decode_steps_other, tokens;
};

static void on_event(void *ctx, const struct sim_event *ev)
{
	struct run_stats *st = ctx;

	if (ev->kind == SIM_EV_TOKEN)
		st->tokens++;
}

/* Runs BATCH requests of prompt lengths prompt[i] and `out` output tokens
 * each; returns the engine's busy time (replica seconds). */
static double engine_seconds(const struct fg_cost_model *cm, const uint32_t *prompt,
			     uint32_t out, struct run_stats *st)
{
	struct sim_engine_config cfg;
	uint64_t total = 0;

	for (int i = 0; i < BATCH; i++)
		total += prompt[i];
	sim_engine_config_defaults(&cfg, 646503);
	cfg.max_num_batched_tokens = (uint32_t)total; /* one prefill step for all */
	cfg.max_num_seqs = BATCH;
	cfg.enable_prefix_caching = false;
	struct sim_engine *e = sim_engine_new(&cfg, cm, on_event, st);
	assert_non_null(e);
	for (int i = 0; i < BATCH; i++) {
		uint32_t *ids = malloc(prompt[i] * sizeof(*ids));
		assert_non_null(ids);
		for (uint32_t k = 0; k < prompt[i]; k++)
			ids[k] = (uint32_t)i * 100003u + k + 1;
		struct sim_seq_params p = { .prompt = ids, .n_prompt = prompt[i], .max_tokens = out };
		assert_non_null(sim_engine_add(e, &p, 0));
		free(ids);
	}
	while (sim_engine_has_work(e)) {
		assert_true(sim_engine_step_begin(e) >= 0);
		const struct sim_step_info *s = sim_engine_last_step(e);
		if (s->decode_seqs == BATCH && !s->prefill_tokens)
			st->decode_steps_full++;
		else if (s->decode_seqs)
			st->decode_steps_other++;
		sim_engine_step_end(e);
	}
	double busy = sim_engine_stats(e)->busy_s;
	sim_engine_free(e);
	return busy;
}

static struct fg_cost_model seed_model(void)
{
	struct fg_policy *p = malloc(sizeof(*p));
	struct fg_cost_model cm;

	assert_non_null(p);
	fg_policy_defaults(p);
	fg_cost_model_init(&cm, &p->replica);
	free(p);
	return cm;
}

static void check_batch(const uint32_t *prompt, uint32_t out)
{
	struct fg_cost_model cm = seed_model();
	struct run_stats st = { 0 };
	double busy = engine_seconds(&cm, prompt, out, &st);
	double billed = 0, billed_flat = 0;

	for (int i = 0; i < BATCH; i++)
		billed += fg_request_units(&cm, prompt[i], 0, out);
	cm.output_pricing = FG_OUTPUT_FLAT;
	for (int i = 0; i < BATCH; i++)
		billed_flat += fg_request_units(&cm, prompt[i], 0, out);

	/* every token came, and every decode step held the whole batch: the
	 * first token of each came with the one prefill step */
	assert_int_equal(st.tokens, BATCH * out);
	assert_int_equal(st.decode_steps_full, out - 1);
	assert_int_equal(st.decode_steps_other, 0);
	/* billed units x the prompt token's time is the engine's time */
	double priced_s = billed * cm.prompt_token_s;
	if (!(fabs(priced_s - busy) <= busy * 1e-9))
		fail_msg("engine %.9f s, priced by context %.9f s", busy, priced_s);
	/* flat would be off by the distance of these contexts from 1,700 */
	print_message("engine %.4f s; priced by context %.4f s, flat %.4f s\n", busy, priced_s,
		      billed_flat * cm.prompt_token_s);
}

static void long_contexts_agree(void **state)
{
	(void)state;
	uint32_t prompt[BATCH];

	for (int i = 0; i < BATCH; i++)
		prompt[i] = 4000;
	check_batch(prompt, 200);
}

static void mixed_contexts_agree(void **state)
{
	(void)state;
	uint32_t prompt[BATCH];

	/* 64 to 8,128 tokens: each decodes against its own context */
	for (int i = 0; i < BATCH; i++)
		prompt[i] = 64 + (uint32_t)i * 63;
	check_batch(prompt, 120);
}

static void flat_disagrees_away_from_the_reference(void **state)
{
	(void)state;
	struct fg_cost_model cm = seed_model();
	struct run_stats st = { 0 };
	uint32_t prompt[BATCH];

	for (int i = 0; i < BATCH; i++)
		prompt[i] = 4000;
	double busy = engine_seconds(&cm, prompt, 200, &st);
	/* flat prices the 200 x 128 output tokens at t(1,700); the engine spent
	 * t(4,001) .. t(4,199) on 199 of each: 16,000 x 0.0326 ns more a step */
	cm.output_pricing = FG_OUTPUT_FLAT;
	double flat_s = BATCH * fg_request_units(&cm, 4000, 0, 200) * cm.prompt_token_s;
	double decode_s = busy - BATCH * 4000 * cm.prompt_token_s;
	double flat_decode_s = flat_s - BATCH * 4000 * cm.prompt_token_s;
	/* 199 x t(4,100) = 199 x 188.52 us against 200 x 110.27 us per sequence */
	assert_true(fabs(decode_s / flat_decode_s - (199 * 188.52) / (200 * 110.27)) < 0.001);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(long_contexts_agree),
		cmocka_unit_test(mixed_contexts_agree),
		cmocka_unit_test(flat_disagrees_away_from_the_reference),
	};
	return cmocka_run_group_tests_name("price_engine", tests, NULL, NULL);
}
