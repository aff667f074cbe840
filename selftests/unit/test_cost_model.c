/* test_cost_model.c — the seed's worked example as test vectors, the price
 * of an output token by the context it decodes against (issue #21's table),
 * plus a second configuration (Llama 3.1 8B, BF16, one H100) worked out by
 * hand. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <cmocka.h>

#include "policy/cost_model.h"
#include "policy/policy.h"

#include "selftests/unit/assert_near.h"

/* within `tol` relative (0.005 = the 0.5%) */
#define assert_close assert_rel

static struct fg_cost_model seed_model(void)
{
	struct fg_policy *p = test_malloc(sizeof(*p));
	struct fg_cost_model cm;

	fg_policy_defaults(p); /* the defaults are the seed's replica */
	fg_cost_model_init(&cm, &p->replica);
	test_free(p);
	return cm;
}

static void seed_prices(void **state)
{
	(void)state;
	struct fg_cost_model cm = seed_model();

	/* prompt token = 2 x 70.55e9 / (4 x 1979e12 x 0.50) = 35.7 us */
	assert_close(cm.prompt_token_s * 1e6, 35.7, 0.005);
	/* decode step = (17.6 GB + 128 x 1,700 x 327,680 B / 4) / 2.51e12 = 14.1 ms */
	assert_close(cm.weights_bytes_per_gpu, 17.6e9, 0.005);
	assert_close(cm.hbm_effective_per_gpu, 2.51e12, 0.005);
	assert_close(cm.decode_step_s * 1e3, 14.1, 0.005);
	/* output token = 14.1 ms / 128 = 110 us */
	assert_close(cm.output_token_s * 1e6, 110, 0.005);
	/* weight = 110 / 35.7 = 3.09 */
	assert_close(cm.output_weight, 3.09, 0.005);
	/* replica budget = 0.65 / 35.7 us = 18,232 units/s */
	assert_close(cm.replica_units_per_s, 18232, 0.005);
	/* dedicated replica: four GPUs at $2.50/h, 720 h = $7,200 a month */
	assert_close(cm.dedicated_usd_per_month, 7200, 1e-9);
}

static void seed_tenant_load(void **state)
{
	(void)state;
	struct fg_cost_model cm = seed_model();
	/* The seed prices every output token at its reference context:
	 * 5 req/s at 2,000 in and 500 out = 17,725 units/s, 0.97 replicas */
	cm.output_pricing = FG_OUTPUT_FLAT;
	struct fg_load_cost l = fg_load_cost(&cm, 5, 2000, 500);

	assert_close(l.units_per_s, 17725, 0.005);
	assert_close(l.replicas, 0.97, 0.005);
	/* raw-token metering would price the same load at 12,500: the ~3x gap */
	assert_close(5 * fg_metered_units(&cm, FG_METER_RAW_TOKENS, 2000, 0, 500), 12500, 1e-9);

	/* Priced by context, the same load decodes above the reference: the
	 * first token comes with the prefill, the other 499 decode from 2,001
	 * to 2,499 tokens of context, 2,250 on average: t(2250) = 54.843 us +
	 * 2,250 x 32.605 ns = 128.21 us = 3.5963 units, so
	 * 5 x (2,000 + 499 x 3.5963) = 18,973 units/s = 1.041 replicas. */
	cm.output_pricing = FG_OUTPUT_CONTEXT;
	l = fg_load_cost(&cm, 5, 2000, 500);
	assert_close(l.units_per_s, 18973, 0.001);
	assert_close(l.replicas, 1.0406, 0.001);
}

/* Issue #21's table: the replica time of one output token by the context the
 * sequence decodes against, t(c) = 17.64 GB / (4 x 2.5125e12 x 128) +
 * c x 327,680 B / (4 x 2.5125e12) = 54.84 us + c x 32.6 ns. */
static void output_token_by_context(void **state)
{
	(void)state;
	struct fg_cost_model cm = seed_model();
	static const struct { double context, us, units; } table[] = {
		{ 1700, 110, 3.09 },      /* the seed's reference */
		{ 8192, 322, 9.0 },
		{ 32768, 1120, 31.5 },
		{ 131072, 4330, 121 },
	};

	assert_close(cm.output_weights_share_s * 1e6, 54.84, 0.001);
	assert_close(cm.output_s_per_context * 1e9, 32.6, 0.001);
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		double s = fg_output_token_s(&cm, table[i].context);
		assert_close(s * 1e6, table[i].us, 0.005);
		assert_close(s / cm.prompt_token_s, table[i].units, 0.005);
		/* one decode step is one token of the series */
		assert_close(fg_decode_units(&cm, table[i].context, 1), s / cm.prompt_token_s, 1e-12);
	}
	/* at the reference context the per-token price is the seed's weight */
	assert_close(fg_output_token_s(&cm, cm.ref_context), cm.output_token_s, 1e-12);
	assert_close(fg_output_token_s(&cm, cm.ref_context) / cm.prompt_token_s, cm.output_weight,
		     1e-12);
}

/* The closed form is the sum it replaces, token by token. */
static void decode_units_closed_form(void **state)
{
	(void)state;
	struct fg_cost_model cm = seed_model();
	static const double cases[][2] = { { 1, 1 }, { 100, 7 }, { 2001, 499 }, { 32769, 4095 },
					   { 130000, 1072 } };

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		double context = cases[i][0], steps = cases[i][1], sum = 0;
		for (double k = 0; k < steps; k++)
			sum += fg_output_token_s(&cm, context + k) / cm.prompt_token_s;
		assert_close(fg_decode_units(&cm, context, steps), sum, 1e-9);
	}
	assert_close(fg_decode_units(&cm, 5000, 0), 0, 0);
	assert_close(fg_decode_units(&cm, 5000, -3), 0, 0);
	/* the mean price of a run is the price at its middle context */
	assert_close(fg_decode_units(&cm, 2001, 499) / 499,
		     fg_output_token_s(&cm, 2250) / cm.prompt_token_s, 1e-9);
}

/* How a request's output is counted, the way the simulator's engine runs it:
 * the first token of a choice is sampled by the prefill step, the k-th is
 * decoded from prompt + k - 1 tokens of KV. */
static void output_units_follow_the_engine(void **state)
{
	(void)state;
	struct fg_cost_model cm = seed_model();
	double w = cm.output_weight;

	/* one token: the prefill's, no decode step */
	assert_close(fg_output_units(&cm, 1700, 1, 1), 0, 0);
	assert_close(fg_request_units(&cm, 1700, 0, 1), 1700, 1e-12);
	/* two tokens: one decode step holding 1,701 tokens */
	assert_close(fg_output_units(&cm, 1700, 2, 1), fg_output_token_s(&cm, 1701) / cm.prompt_token_s,
		     1e-12);
	/* 400 tokens from a 1,500-token prompt: 399 steps from 1,501 to 1,899,
	 * centred on the reference context: 399 x the seed's weight */
	assert_close(fg_output_units(&cm, 1500, 400, 1), 399 * w, 1e-9);
	/* a 32K prompt: 99 steps from 32,769 to 32,867, t(32818) = 31.554 units */
	assert_close(fg_output_units(&cm, 32768, 100, 1), 99 * 31.554, 0.0005);
	/* n choices each decode from the prompt: 4 x 100 tokens split 4 ways
	 * is four choices of 100, not one of 400 */
	assert_close(fg_output_units(&cm, 32768, 400, 4), 4 * fg_output_units(&cm, 32768, 100, 1),
		     1e-12);
	/* the equal split errs low: any other split of 400 tokens over 4
	 * choices costs more (the price is convex in a choice's length) */
	double skewed = fg_output_units(&cm, 32768, 10, 1) + fg_output_units(&cm, 32768, 90, 1) +
			fg_output_units(&cm, 32768, 100, 1) + fg_output_units(&cm, 32768, 200, 1);
	assert_true(fg_output_units(&cm, 32768, 400, 4) < skewed);
	/* fewer tokens than choices: every one came with a prefill */
	assert_close(fg_output_units(&cm, 1000, 3, 4), 0, 0);
	/* n below one is read as one; nothing is never priced */
	assert_close(fg_output_units(&cm, 1000, 50, 0), fg_output_units(&cm, 1000, 50, 1), 1e-12);
	assert_close(fg_output_units(&cm, 1000, 0, 1), 0, 0);
	assert_close(fg_output_units(&cm, 1000, -5, 1), 0, 0);
	/* cached prompt tokens are cheap to prefill but their KV is read by
	 * every decode step: the context counts them */
	assert_close(fg_request_units(&cm, 32768, 32768, 100),
		     32768 * 0.1 + fg_output_units(&cm, 32768, 100, 1), 1e-12);

	/* flat: every output token at the reference weight, n irrelevant */
	cm.output_pricing = FG_OUTPUT_FLAT;
	assert_close(fg_output_units(&cm, 32768, 100, 1), 100 * w, 1e-12);
	assert_close(fg_output_units(&cm, 32768, 400, 4), 400 * w, 1e-12);
	assert_close(fg_output_units(&cm, 1700, 1, 1), w, 1e-12);
}

/* The mode comes from the policy; raw_tokens and requests ignore it. */
static void pricing_mode_from_policy(void **state)
{
	(void)state;
	struct fg_policy *p = test_malloc(sizeof(*p));
	struct fg_cost_model cm;

	fg_policy_defaults(p);
	assert_int_equal(p->agent.output_pricing, FG_OUTPUT_CONTEXT);
	fg_cost_model_init_policy(&cm, p);
	assert_int_equal(cm.output_pricing, FG_OUTPUT_CONTEXT);
	double by_context = fg_metered_units_n(&cm, FG_METER_REPLICA_TIME, 32768, 0, 400, 4);
	assert_close(by_context, 32768 + 4 * 99 * 31.554, 0.0005);
	p->agent.output_pricing = FG_OUTPUT_FLAT;
	fg_cost_model_init_policy(&cm, p);
	assert_int_equal(cm.output_pricing, FG_OUTPUT_FLAT);
	assert_close(fg_metered_units_n(&cm, FG_METER_REPLICA_TIME, 32768, 0, 400, 4),
		     32768 + 400 * cm.output_weight, 1e-12);
	for (int flat = 0; flat < 2; flat++) {
		cm.output_pricing = flat ? FG_OUTPUT_FLAT : FG_OUTPUT_CONTEXT;
		assert_close(fg_metered_units_n(&cm, FG_METER_RAW_TOKENS, 32768, 0, 400, 4), 33168,
			     0);
		assert_close(fg_metered_units_n(&cm, FG_METER_REQUESTS, 32768, 0, 400, 4), 1700, 0);
	}
	test_free(p);
}

static void seed_kv(void **state)
{
	(void)state;
	struct fg_cost_model cm = seed_model();
	/* KV per token = 2 x 80 x 8 x 128 x 2 B = 327,680 B */
	assert_close(cm.kv_bytes_per_token, 327680, 1e-12);
	assert_close(cm.kv_pool_tokens, 646503, 1e-12);
	/* 128K request = 131,072 x 327,680 B = 40.0 GiB, 10.7 GB per GPU, 20% */
	struct fg_context_cost c = fg_context_cost(&cm, 131072);
	assert_close(c.kv_gib, 40.0, 0.005);
	assert_close(c.kv_bytes_per_gpu / 1e9, 10.7, 0.005);
	assert_close(c.pool_share, 0.20, 0.02); /* the seed rounds 20.3% to 20% */
	assert_close(c.pool_share, 131072.0 / 646503.0, 1e-12);
}

static void decode_step_scales_with_context(void **state)
{
	(void)state;
	struct fg_cost_model cm = seed_model();
	/* an empty batch still reads the weights once per step */
	assert_close(fg_decode_step_s(&cm, 0), 17.6375e9 / 2.5125e12, 1e-9);
	/* doubling the resident context adds exactly the KV-read term again */
	double kv_term = cm.decode_step_s - fg_decode_step_s(&cm, 0);
	assert_close(fg_decode_step_s(&cm, 2 * 128 * 1700) - cm.decode_step_s, kv_term, 1e-9);
}

static void request_units_cached_and_clamped(void **state)
{
	(void)state;
	struct fg_cost_model cm = seed_model();
	/* 1,000 prompt tokens, 800 cached at weight 0.1, 100 out: 99 decode
	 * steps from 1,001 to 1,099 tokens, t(1050) = 54.843 us + 1,050 x
	 * 32.605 ns = 89.078 us = 2.4987 units */
	assert_close(fg_request_units(&cm, 1000, 800, 100), 200 + 80 + 99 * 2.4987, 1e-4);
	cm.output_pricing = FG_OUTPUT_FLAT;
	assert_close(fg_request_units(&cm, 1000, 800, 100), 200 + 80 + 100 * cm.output_weight, 1e-12);
	cm.output_pricing = FG_OUTPUT_CONTEXT;
	/* more cached than prompt is clamped: never a negative charge */
	assert_close(fg_request_units(&cm, 100, 500, 0), 10, 1e-12);
	assert_close(fg_metered_units(&cm, FG_METER_REPLICA_TIME, 1000, 800, 100),
		     fg_request_units(&cm, 1000, 800, 100), 1e-12);
	assert_close(fg_metered_units(&cm, FG_METER_REQUESTS, 1, 0, 1),
		     fg_metered_units(&cm, FG_METER_REQUESTS, 100000, 0, 4000), 1e-12);
}

/* Llama 3.1 8B in BF16 on one H100 (989 TFLOP/s dense BF16), batch 64 at
 * 2,000 tokens, 70% ceiling. By hand:
 *   prompt token = 2 x 8.03e9 / (1 x 989e12 x 0.50)           = 32.477 us
 *   KV per token = 2 x 32 x 8 x 128 x 2 B                      = 131,072 B
 *   decode step  = (16.06 GB + 64 x 2,000 x 131,072 B) / 2.5125e12 = 13.0695 ms
 *   output token = 13.0695 ms / 64                            = 204.21 us
 *   weight       = 204.21 / 32.477                             = 6.288
 *   budget       = 0.70 / 32.477 us                            = 21,554 units/s
 *   2 req/s at 1,000 in / 300 out, flat = 2 x (1,000 + 300 x 6.288) = 5,773 units/s = 0.268 replicas
 *   32K context  = 32,768 x 131,072 B = 4.0 GiB, 8.2% of a 400,000-token pool
 *   dedicated    = 1 x $2.50 x 720                             = $1,800
 * and an output token by its context:
 *   weights' share = 16.06 GB / 2.5125e12 / 64                 = 6.3920 ms / 64 = 99.876 us
 *   KV read        = 131,072 B / (1 x 2.5125e12)               = 52.168 ns per token of context
 *   t(2,000)       = 99.876 + 2,000 x 0.052168 = 204.21 us     = the weight above, 6.288 units
 *   t(8,192)       = 99.876 + 427.36           = 527.24 us     = 16.234 units
 *   t(32,768)      = 99.876 + 1,709.44         = 1,809.3 us    = 55.710 units
 *   the same load by context: 299 decode steps from 1,001 to 1,299, mean
 *   t(1,150) = 99.876 + 59.993 = 159.87 us = 4.9225 units; 2 x (1,000 +
 *   299 x 4.9225) = 4,943.6 units/s = 0.2294 replicas
 *   n = 4 choices of 100 tokens after a 32,768-token prompt: 4 x 99 steps
 *   centred on 32,818: t = 99.876 + 1,712.05 = 1,811.9 us = 55.790 units,
 *   4 x 99 x 55.790 = 22,093 units (one choice of 400 would be 399 x t(32,968)
 *   = 399 x 56.031 = 22,357) */
static void llama8b_single_gpu(void **state)
{
	(void)state;
	struct fg_policy *p = test_malloc(sizeof(*p));
	fg_policy_defaults(p);
	struct fg_replica *r = &p->replica;
	r->model.params = 8.03e9;
	r->model.layers = 32;
	r->model.kv_heads = 8;
	r->model.head_dim = 128;
	r->model.weight_bytes = 2;
	r->model.kv_bytes = 2;
	r->gpus = 1;
	r->peak_flops = 989e12;
	r->decode_batch = 64;
	r->decode_context = 2000;
	r->kv_pool_tokens = 400000;
	r->ceiling = 0.70;
	struct fg_cost_model cm;
	fg_cost_model_init(&cm, r);
	test_free(p);

	assert_close(cm.prompt_token_s * 1e6, 32.477, 0.001);
	assert_close(cm.kv_bytes_per_token, 131072, 1e-12);
	assert_close(cm.decode_step_s * 1e3, 13.0695, 0.001);
	assert_close(cm.output_token_s * 1e6, 204.21, 0.001);
	assert_close(cm.output_weight, 6.288, 0.001);
	assert_close(cm.replica_units_per_s, 21554, 0.001);
	assert_close(cm.output_weights_share_s * 1e6, 99.876, 0.0001);
	assert_close(cm.output_s_per_context * 1e9, 52.168, 0.0001);
	assert_close(fg_output_token_s(&cm, 2000) * 1e6, 204.21, 0.0001);
	assert_close(fg_output_token_s(&cm, 8192) / cm.prompt_token_s, 16.234, 0.0001);
	assert_close(fg_output_token_s(&cm, 32768) * 1e6, 1809.3, 0.0001);
	assert_close(fg_output_token_s(&cm, 32768) / cm.prompt_token_s, 55.710, 0.0001);
	struct fg_load_cost l = fg_load_cost(&cm, 2, 1000, 300);
	assert_close(l.units_per_s, 4943.6, 0.0001);
	assert_close(l.replicas, 0.2294, 0.001);
	assert_close(fg_output_units(&cm, 32768, 400, 4), 22093, 0.0001);
	assert_close(fg_output_units(&cm, 32768, 400, 1), 22357, 0.0001);
	cm.output_pricing = FG_OUTPUT_FLAT;
	l = fg_load_cost(&cm, 2, 1000, 300);
	assert_close(l.units_per_s, 5773, 0.001);
	assert_close(l.replicas, 0.2678, 0.001);
	struct fg_context_cost c = fg_context_cost(&cm, 32768);
	assert_close(c.kv_gib, 4.0, 1e-9);
	assert_close(c.pool_share, 0.08192, 1e-9);
	assert_close(cm.dedicated_usd_per_month, 1800, 1e-9);
	assert_close(fg_replicas_to_units(&cm, 0.5), 10777, 0.001);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(seed_prices),
		cmocka_unit_test(seed_tenant_load),
		cmocka_unit_test(seed_kv),
		cmocka_unit_test(output_token_by_context),
		cmocka_unit_test(decode_units_closed_form),
		cmocka_unit_test(output_units_follow_the_engine),
		cmocka_unit_test(pricing_mode_from_policy),
		cmocka_unit_test(decode_step_scales_with_context),
		cmocka_unit_test(request_units_cached_and_clamped),
		cmocka_unit_test(llama8b_single_gpu),
	};
	return cmocka_run_group_tests_name("cost_model", tests, NULL, NULL);
}
