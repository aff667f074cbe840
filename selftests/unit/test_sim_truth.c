/* test_sim_truth.c — the hardware fairgate-sim really is (sim/truth.h): the
 * true cost model from a stated truth, a step's duration and each
 * sequence's share of it worked by hand on the seed replica, the shares
 * adding up to the busy time under preemption and prefix caching, and the
 * truth file's parser. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "policy/cost_model.h"
#include "policy/policy.h"
#include "sim/engine.h"
#include "policy/policy_yaml.h"
#include "sim/truth.h"

#define assert_close(got, want, tol)                                                      \
	do {                                                                              \
		double g_ = (got), w_ = (want);                                           \
		if (!(fabs(g_ - w_) <= fabs(w_) * (tol) + 1e-15)) {                       \
			print_error("%s = %.12g, want %.12g\n", #got, g_, w_);            \
			fail();                                                           \
		}                                                                         \
	} while (0)

/* The seed replica: 70.55e9 params at 1 byte on 4 GPUs of 1979 TFLOP/s and
 * 3.35 TB/s; KV 2 x 80 layers x 8 heads x 128 x 2 bytes = 327,680 B a token. */
static struct fg_replica seed_replica(void)
{
	struct fg_policy *p = malloc(sizeof(*p));
	struct fg_replica r;

	assert_non_null(p);
	fg_policy_defaults(p);
	r = p->replica;
	free(p);
	return r;
}

/* The stated truth of issue #18's example. */
static const struct sim_truth stated = {
	.prefill_mfu = 0.38, .decode_mbu = 0.62, .step_overhead_s = 3e-3, .seq_overhead_s = 50e-6,
};

static void true_hardware_by_hand(void **state)
{
	(void)state;
	struct fg_replica r = seed_replica();
	struct fg_cost_model hw, pol;
	struct sim_truth none = { 0 };

	sim_truth_hardware(&stated, &r, &hw);
	/* 2 x 70.55e9 / (4 x 1979e12 x 0.38) = 141.1e9 / 3.00808e15 */
	assert_close(hw.prompt_token_s, 4.6906997e-5, 1e-7);
	/* weights: 70.55e9 / 4 / (3.35e12 x 0.62) = 17.6375e9 / 2.077e12 */
	assert_close(fg_decode_step_s(&hw, 0), 8.4918151e-3, 1e-7);
	/* a KV token: 327,680 / 4 / 2.077e12 */
	assert_close(fg_decode_step_s(&hw, 1) - fg_decode_step_s(&hw, 0), 3.9441502e-8, 1e-6);
	/* the policy's own: 141.1e9 / (4 x 1979e12 x 0.5) = 35.649 us */
	fg_cost_model_init(&pol, &r);
	assert_close(pol.prompt_token_s, 3.5649318e-5, 1e-7);
	assert_true(sim_truth_is_policy(&none));
	assert_false(sim_truth_is_policy(&stated));
	sim_truth_hardware(&none, &r, &hw);
	assert_true(hw.prompt_token_s == pol.prompt_token_s);
	assert_true(hw.decode_step_s == pol.decode_step_s);
	assert_true(hw.output_weight == pol.output_weight);
	assert_true(hw.hbm_effective_per_gpu == pol.hbm_effective_per_gpu);
}

static uint32_t *ids(uint32_t n, uint32_t tag)
{
	uint32_t *p = malloc((size_t)n * sizeof(*p));

	for (uint32_t i = 0; i < n; i++)
		p[i] = tag << 20 | i;
	return p;
}

static struct sim_seq *add(struct sim_engine *e, uint32_t n, uint32_t tag, uint32_t max_tokens)
{
	uint32_t *p = ids(n, tag);
	struct sim_seq_params sp = { .prompt = p, .n_prompt = n, .max_tokens = max_tokens };
	struct sim_seq *s = sim_engine_add(e, &sp, sim_engine_now(e));

	free(p);
	assert_non_null(s);
	return s;
}

static struct sim_engine *stated_engine(void)
{
	struct fg_replica r = seed_replica();
	struct fg_cost_model hw;
	struct sim_engine_config cfg;

	sim_truth_hardware(&stated, &r, &hw);
	sim_engine_config_defaults(&cfg, r.kv_pool_tokens);
	cfg.step_overhead_s = stated.step_overhead_s;
	cfg.seq_overhead_s = stated.seq_overhead_s;
	return sim_engine_new(&cfg, &hw, NULL, NULL);
}

/* Step 1 prefills A (999 tokens) and B (2999); step 2 decodes A at context
 * 1000 and B at 3000 while C prefills 512. Worked by hand with
 * t_p = 46.906997 us, W = 8.4918151 ms, t_kv = 39.441502 ns, F = 3 ms,
 * S = 50 us. */
static void step_and_shares_by_hand(void **state)
{
	(void)state;
	struct sim_engine *e = stated_engine();
	struct sim_seq *a = add(e, 999, 1, 100), *b = add(e, 2999, 2, 100);

	/* F + 2S + 3998 t_p = 3 + 0.1 + 187.5342 ms */
	assert_close(sim_engine_step_begin(e), 0.19063417, 1e-7);
	sim_engine_step_end(e);
	/* A: F/2 + S + 999 t_p = 1.5 + 0.05 + 46.86009 ms; B likewise with 2999 */
	assert_close(a->replica_prefill_s, 0.048410090, 1e-7);
	assert_close(b->replica_prefill_s, 0.14222408, 1e-7);
	assert_close(a->replica_decode_s, 0, 0);

	struct sim_seq *c = add(e, 512, 3, 100);
	const struct sim_step_info *st = sim_engine_last_step(e);
	/* F + 3S + 512 t_p + W + 4000 t_kv
	 * = 3 + 0.15 + 24.016383 + 8.4918151 + 0.157766 ms */
	assert_close(sim_engine_step_begin(e), 0.035815964, 1e-7);
	assert_int_equal(st->decode_seqs, 2);
	assert_int_equal(st->decode_context, 4000);
	assert_int_equal(st->prefill_tokens, 512);
	sim_engine_step_end(e);
	/* C: F/3 + S + 512 t_p; A: F/3 + S + W/2 + 1000 t_kv; B with 3000 */
	assert_close(c->replica_prefill_s, 0.025066383, 1e-7);
	assert_close(a->replica_decode_s, 0.0053353491, 1e-7);
	assert_close(b->replica_decode_s, 0.0054142321, 1e-7);
	assert_close(a->replica_decode_s + b->replica_decode_s + c->replica_prefill_s,
		     0.035815964, 1e-7);
	assert_close(sim_engine_stats(e)->busy_s, 0.19063417 + 0.035815964, 1e-7);
	sim_engine_free(e);
}

struct shares {
	double total;
	uint32_t finished;
};

static void sum_shares(void *ctx, const struct sim_event *ev)
{
	struct shares *sh = ctx;

	if (ev->kind == SIM_EV_TOKEN && ev->seq->finish != SIM_FINISH_NONE) {
		sh->total += ev->seq->replica_prefill_s + ev->seq->replica_decode_s;
		sh->finished++;
	}
}

/* Under KV pressure (preemption and recompute), shared prefixes and
 * chunked prefill, the finished sequences' shares add up to the busy time:
 * nothing is lost or charged twice. */
static void shares_add_up_to_the_busy_time(void **state)
{
	(void)state;
	struct fg_replica r = seed_replica();
	struct fg_cost_model hw;
	struct sim_engine_config cfg;
	struct shares sh = { 0 };

	sim_truth_hardware(&stated, &r, &hw);
	sim_engine_config_defaults(&cfg, 40000);
	cfg.max_model_len = 16384;
	cfg.step_overhead_s = stated.step_overhead_s;
	cfg.seq_overhead_s = stated.seq_overhead_s;
	struct sim_engine *e = sim_engine_new(&cfg, &hw, sum_shares, &sh);
	for (uint32_t i = 0; i < 60; i++)
		add(e, 200 + (i * 977) % 9000, i % 7, 50 + (i * 37) % 400);
	while (sim_engine_has_work(e)) {
		assert_true(sim_engine_step_begin(e) >= 0);
		sim_engine_step_end(e);
	}
	const struct sim_engine_stats *st = sim_engine_stats(e);
	assert_int_equal(sh.finished, 60);
	assert_true(st->num_preemptions > 0);
	assert_true(st->prefix_cache_hits > 0);
	assert_close(sh.total, st->busy_s, 1e-9);
	assert_close(st->replica_prefill_s + st->replica_decode_s, st->busy_s, 1e-9);
	sim_engine_free(e);
}

static int load(const char *yaml, struct sim_truth *t, char *err, size_t len)
{
	char path[] = "/tmp/test_sim_truth.XXXXXX";
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, yaml, strlen(yaml)), (ssize_t)strlen(yaml));
	close(fd);
	int rc = sim_truth_load(path, t, err, len);
	unlink(path);
	return rc;
}

static void truth_files(void **state)
{
	(void)state;
	struct sim_truth t = { 0 };
	char err[300];

	assert_int_equal(load("truth:\n  prefill_mfu: 0.38\n  decode_mbu: 0.62\n"
			      "  step_overhead_ms: 3\n  seq_overhead_us: 20\n", &t, err, sizeof(err)), 0);
	assert_close(t.prefill_mfu, 0.38, 0);
	assert_close(t.decode_mbu, 0.62, 0);
	assert_close(t.step_overhead_s, 3e-3, 1e-12);
	assert_close(t.seq_overhead_s, 20e-6, 1e-12);
	/* bare keys; what a file does not name stays */
	assert_int_equal(load("{\"decode_mbu\": 0.5}", &t, err, sizeof(err)), 0);
	assert_close(t.decode_mbu, 0.5, 0);
	assert_close(t.prefill_mfu, 0.38, 0);

	struct { const char *yaml, *needle; } bad[] = {
		{ "prefill_mfu: 1.5\n", "prefill_mfu must be in (0, 1]" },
		{ "decode_mbu: 0\n", "decode_mbu must be in (0, 1]" },
		{ "step_overhead_ms: -1\n", "step_overhead_ms must be in [0" },
		{ "prefill_mfu: fast\n", "'fast' is not a number" },
		{ "prefill_mfu: \"0.4\"\n", "expected `key: number`" },
		{ "mfu: 0.4\n", "unknown key 'mfu'" },
		{ "- 0.4\n", "a truth is a mapping" },
		{ "truth: [1]\n", "a truth is a mapping" },
		{ "prefill_mfu: [0.4\n", "" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		struct sim_truth u = { 0 };
		if (load(bad[i].yaml, &u, err, sizeof(err)) == 0 || !strstr(err, bad[i].needle)) {
			print_error("%s -> %s\n", bad[i].yaml, err);
			fail();
		}
		assert_non_null(strstr(err, "/tmp/test_sim_truth."));
	}
	assert_int_equal(sim_truth_load("/nonexistent/truth.yaml", &t, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "No such file"));
	/* a file past the YAML reader's limit is refused, not cut short */
	char *huge = malloc(FG_YAML_MAX_BYTES + 2);
	assert_non_null(huge);
	memset(huge, '#', FG_YAML_MAX_BYTES + 1);
	huge[FG_YAML_MAX_BYTES + 1] = '\0';
	assert_int_equal(load(huge, &t, err, sizeof(err)), -1);
	assert_non_null(strstr(err, ": too large"));
	free(huge);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(true_hardware_by_hand),
		cmocka_unit_test(step_and_shares_by_hand),
		cmocka_unit_test(shares_add_up_to_the_busy_time),
		cmocka_unit_test(truth_files),
	};
	return cmocka_run_group_tests_name("sim_truth", tests, NULL, NULL);
}
