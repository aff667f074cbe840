/* test_cost_model.c — the seed's worked example as test vectors, plus a
 * second configuration (Llama 3.1 8B, BF16, one H100) worked out by hand. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <cmocka.h>

#include "policy/cost_model.h"
#include "policy/policy.h"

/* within `tol` relative (0.005 = the 0.5%); prints what differed */
#define assert_close(got, want, tol)                                                      \
	do {                                                                              \
		double g_ = (got), w_ = (want);                                           \
		if (!(fabs(g_ - w_) <= fabs(w_) * (tol))) {                               \
			print_error("%s = %.6g, want %.6g (±%.2g%%)\n", #got, g_, w_,       \
				    (tol) * 100);                                          \
			fail();                                                           \
		}                                                                         \
	} while (0)

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
	/* 5 req/s at 2,000 in and 500 out = 17,725 units/s, 0.97 replicas */
	struct fg_load_cost l = fg_load_cost(&cm, 5, 2000, 500);

	assert_close(l.units_per_s, 17725, 0.005);
	assert_close(l.replicas, 0.97, 0.005);
	/* raw-token metering would price the same load at 12,500: the ~3x gap */
	assert_close(5 * fg_metered_units(&cm, FG_METER_RAW_TOKENS, 2000, 0, 500), 12500, 1e-9);
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
	/* 1,000 prompt tokens, 800 cached at weight 0.1, 100 out */
	assert_close(fg_request_units(&cm, 1000, 800, 100), 200 + 80 + 100 * cm.output_weight, 1e-12);
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
 *   2 req/s at 1,000 in / 300 out = 2 x (1,000 + 300 x 6.288)  = 5,773 units/s = 0.268 replicas
 *   32K context  = 32,768 x 131,072 B = 4.0 GiB, 8.2% of a 400,000-token pool
 *   dedicated    = 1 x $2.50 x 720                             = $1,800 */
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
	struct fg_load_cost l = fg_load_cost(&cm, 2, 1000, 300);
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
		cmocka_unit_test(decode_step_scales_with_context),
		cmocka_unit_test(request_units_cached_and_clamped),
		cmocka_unit_test(llama8b_single_gpu),
	};
	return cmocka_run_group_tests_name("cost_model", tests, NULL, NULL);
}
