/* test_sim_engine.c — the simulated replica in virtual time, driven without
 * sockets: prefill and decode timings against the cost model (and the
 * seed's numbers), chunked prefill, preemption by recompute under KV
 * pressure (FCFS and priority victims), the prefix cache and cache_salt,
 * aborts, and determinism. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "policy/cost_model.h"
#include "policy/policy.h"
#include "sim/engine.h"

#define assert_close(got, want, tol)                                                      \
	do {                                                                              \
		double g_ = (got), w_ = (want);                                           \
		if (!(fabs(g_ - w_) <= fabs(w_) * (tol) + 1e-12)) {                       \
			print_error("%s = %.9g, want %.9g\n", #got, g_, w_);              \
			fail();                                                           \
		}                                                                         \
	} while (0)

#define MAX_TRACK 512

/* What the event callback saw, per sequence id. */
struct tracker {
	uint32_t tokens[MAX_TRACK];
	uint32_t preempted[MAX_TRACK];
	double first_token[MAX_TRACK], finished[MAX_TRACK], first_scheduled[MAX_TRACK];
	uint32_t cached[MAX_TRACK];
	uint64_t recomputed[MAX_TRACK];
	enum sim_finish finish[MAX_TRACK];
	uint32_t n_finished;
	uint64_t preempt_order[MAX_TRACK];
	uint32_t n_preempt_order;
};

static void track(void *ctx, const struct sim_event *ev)
{
	struct tracker *t = ctx;
	const struct sim_seq *s = ev->seq;

	if (s->id >= MAX_TRACK)
		return;
	if (ev->kind == SIM_EV_PREEMPTED) {
		t->preempted[s->id]++;
		if (t->n_preempt_order < MAX_TRACK)
			t->preempt_order[t->n_preempt_order++] = s->id;
		return;
	}
	t->tokens[s->id] = s->n_output;
	t->first_token[s->id] = s->first_token;
	t->first_scheduled[s->id] = s->first_scheduled;
	t->cached[s->id] = s->cached_tokens;
	t->recomputed[s->id] = s->recomputed_tokens;
	if (s->finish != SIM_FINISH_NONE) {
		t->finished[s->id] = s->finished;
		t->finish[s->id] = s->finish;
		t->n_finished++;
	}
}

static struct fg_cost_model seed_cost_model(void)
{
	struct fg_policy *p = malloc(sizeof(*p));
	struct fg_cost_model cm;

	assert_non_null(p);
	fg_policy_defaults(p);
	fg_cost_model_init(&cm, &p->replica);
	free(p);
	return cm;
}

static struct sim_engine_config config(uint64_t pool)
{
	struct sim_engine_config c;

	sim_engine_config_defaults(&c, pool);
	return c;
}

/* A prompt of n tokens whose ids depend on `tag` (different tags share nothing). */
static uint32_t *prompt_ids(uint32_t n, uint32_t tag)
{
	uint32_t *ids = malloc((size_t)n * sizeof(*ids));

	assert_non_null(ids);
	for (uint32_t i = 0; i < n; i++)
		ids[i] = tag * 1000003u + i;
	return ids;
}

static struct sim_seq *add(struct sim_engine *e, uint32_t n_prompt, uint32_t tag,
			   uint32_t max_tokens, int32_t prio, const char *salt, double t)
{
	uint32_t *ids = prompt_ids(n_prompt, tag);
	struct sim_seq_params p = { .prompt = ids, .n_prompt = n_prompt, .max_tokens = max_tokens,
				    .priority = prio, .cache_salt = salt };
	struct sim_seq *s = sim_engine_add(e, &p, t);

	free(ids);
	assert_non_null(s);
	return s;
}

/* Run steps until idle (bounded); returns the number of steps. */
static uint32_t run(struct sim_engine *e)
{
	uint32_t steps = 0;

	while (sim_engine_has_work(e) && steps < 2000000) {
		double d = sim_engine_step_begin(e);
		assert_true(d >= 0);
		sim_engine_step_end(e);
		steps++;
	}
	assert_false(sim_engine_has_work(e));
	return steps;
}

static void pool_is_whole_again(struct sim_engine *e)
{
	const struct sim_kv_pool *pool = sim_engine_pool(e);

	assert_int_equal(sim_kv_pool_num_free(pool), pool->num_blocks);
	assert_close(sim_kv_pool_usage(pool), 0, 0);
}

/* ---- timings ------------------------------------------------------------------ */

/* An engine on the seed's cost model whose events go to a fresh tracker
 * (*t); engine_done frees both. */
static struct sim_engine *tracked_engine(const struct sim_engine_config *cfg, struct tracker **t)
{
	struct fg_cost_model cm = seed_cost_model();

	*t = calloc(1, sizeof(**t));
	assert_non_null(*t);
	return sim_engine_new(cfg, &cm, track, *t);
}

static void engine_done(struct sim_engine *e, struct tracker *t)
{
	sim_engine_free(e);
	free(t);
}

static void lone_prompt_ttft_is_prefill_time(void **state)
{
	(void)state;
	struct fg_cost_model cm = seed_cost_model();
	struct sim_engine_config cfg = config(646503);
	struct tracker *t;
	struct sim_engine *e = tracked_engine(&cfg, &t);

	add(e, 2000, 1, 1, 0, NULL, 0);
	assert_int_equal(run(e), 1);
	/* the seed's 35.7 us per prompt token */
	assert_close(cm.prompt_token_s, 35.7e-6, 0.005);
	assert_close(t->first_token[0], 2000 * cm.prompt_token_s, 1e-12);
	assert_close(t->first_token[0], 0.0713, 0.005);
	assert_int_equal(t->finish[0], SIM_FINISH_LENGTH);
	pool_is_whole_again(e);
	engine_done(e, t);
}

static void arrival_offsets_ttft(void **state)
{
	(void)state;
	struct fg_cost_model cm = seed_cost_model();
	struct sim_engine_config cfg = config(646503);
	struct tracker *t;
	struct sim_engine *e = tracked_engine(&cfg, &t);

	sim_engine_advance_idle(e, 5.0);
	add(e, 2000, 1, 1, 0, NULL, 5.0);
	run(e);
	assert_close(t->first_token[0] - 5.0, 2000 * cm.prompt_token_s, 1e-9);
	engine_done(e, t);
}

static void long_prompt_prefills_in_chunks(void **state)
{
	(void)state;
	struct fg_cost_model cm = seed_cost_model();
	struct sim_engine_config cfg = config(646503);
	struct tracker *t;
	struct sim_engine *e = tracked_engine(&cfg, &t);

	add(e, 20000, 1, 1, 0, NULL, 0);
	assert_true(sim_engine_step_begin(e) > 0);
	assert_int_equal(sim_engine_last_step(e)->prefill_tokens, 8192);
	sim_engine_step_end(e);
	assert_int_equal(t->tokens[0], 0); /* a chunk samples nothing */
	assert_int_equal(run(e), 2);       /* 8192 + 8192 + 3616 */
	assert_close(t->first_token[0], 20000 * cm.prompt_token_s, 1e-9);
	/* vLLM's iteration tokens see only the step with an output: the
	 * last chunk's, with the whole prompt and its first token */
	const struct sim_histogram *it = &sim_engine_stats(e)->iteration_tokens;
	assert_int_equal(it->count, 1);
	assert_true(it->sum == 20001);
	engine_done(e, t);
}

static void decode_step_matches_formula(void **state)
{
	(void)state;
	struct fg_cost_model cm = seed_cost_model();
	struct sim_engine_config cfg = config(646503);
	struct tracker *t = calloc(1, sizeof(*t));

	/* budget large enough to prefill the whole batch in one step, so the
	 * next step decodes exactly B sequences of context C */
	cfg.max_num_batched_tokens = 1u << 18;
	for (uint32_t b = 1; b <= 128; b *= 4) {
		const uint32_t C = 1700;
		struct sim_engine *e = sim_engine_new(&cfg, &cm, track, t);
		for (uint32_t i = 0; i < b; i++)
			add(e, C - 1, i, 3, 0, NULL, 0);
		sim_engine_step_begin(e);
		assert_int_equal(sim_engine_last_step(e)->decode_seqs, 0);
		sim_engine_step_end(e);
		double d = sim_engine_step_begin(e);
		const struct sim_step_info *st = sim_engine_last_step(e);
		assert_int_equal(st->decode_seqs, b);
		assert_int_equal(st->prefill_tokens, 0);
		assert_int_equal(st->decode_context, (uint64_t)b * C);
		/* (weights/gpu + B*C*kv_bytes_per_token/gpu) / (hbm * mbu) */
		double want = (70.55e9 * 1 / 4 + (double)b * C * 327680 / 4) / (3.35e12 * 0.75);
		assert_close(d, want, 1e-9);
		assert_close(d, fg_decode_step_s(&cm, (double)b * C), 1e-12);
		if (b == 128) {
			assert_close(d, 14.1e-3, 0.005);            /* the seed's decode step */
			assert_close(d / b, 110e-6, 0.005);         /* and its output token */
		}
		sim_engine_step_end(e);
		run(e);
		/* TPOT of a sequence = its decode steps */
		sim_engine_free(e);
	}
	free(t);
}

static void mixed_step_adds_prefill_and_decode(void **state)
{
	(void)state;
	struct fg_cost_model cm = seed_cost_model();
	struct sim_engine_config cfg = config(646503);
	struct tracker *t;
	struct sim_engine *e = tracked_engine(&cfg, &t);

	add(e, 100, 1, 10, 0, NULL, 0);
	sim_engine_step_begin(e);
	sim_engine_step_end(e);
	add(e, 500, 2, 10, 0, NULL, sim_engine_now(e));
	double d = sim_engine_step_begin(e);
	const struct sim_step_info *st = sim_engine_last_step(e);
	assert_int_equal(st->decode_seqs, 1);
	assert_int_equal(st->prefill_tokens, 500);
	assert_close(d, 500 * cm.prompt_token_s + fg_decode_step_s(&cm, 101), 1e-12);
	sim_engine_step_end(e);
	run(e);
	engine_done(e, t);
}

/* ---- KV pressure ---------------------------------------------------------------- */

static void oversubscribed_pool_preempts_and_recomputes(void **state)
{
	(void)state;
	struct sim_engine_config cfg = config(4096); /* 256 blocks */
	struct tracker *t;

	cfg.max_model_len = 4096;
	struct sim_engine *e = tracked_engine(&cfg, &t);
	/* four contexts growing to 2000 tokens each: 8000 > 4096 */
	for (uint32_t i = 0; i < 4; i++)
		add(e, 1000, i, 1000, 0, NULL, 0);
	run(e);
	const struct sim_engine_stats *st = sim_engine_stats(e);
	assert_true(st->num_preemptions > 0);
	assert_true(st->recomputed_tokens > 0);
	/* FCFS takes the latest running sequence first */
	assert_int_equal(t->preempt_order[0], 3);
	for (uint32_t i = 0; i < 4; i++) {
		assert_int_equal(t->tokens[i], 1000); /* nothing lost */
		assert_int_equal(t->finish[i], SIM_FINISH_LENGTH);
	}
	assert_int_equal(t->n_finished, 4);
	assert_int_equal(t->preempted[0], 0); /* the oldest always keeps its blocks */
	assert_int_equal(st->generation_tokens, 4000);
	pool_is_whole_again(e);
	engine_done(e, t);
}

static void fitting_load_never_preempts(void **state)
{
	(void)state;
	struct sim_engine_config cfg = config(4096);
	struct tracker *t;

	cfg.max_model_len = 4096;
	struct sim_engine *e = tracked_engine(&cfg, &t);
	for (uint32_t i = 0; i < 2; i++) /* 2 x 2000 tokens = 250 blocks of 256 */
		add(e, 1000, i, 1000, 0, NULL, 0);
	run(e);
	assert_int_equal(sim_engine_stats(e)->num_preemptions, 0);
	assert_int_equal(sim_engine_stats(e)->recomputed_tokens, 0);
	assert_int_equal(t->tokens[0], 1000);
	assert_int_equal(t->tokens[1], 1000);
	pool_is_whole_again(e);
	engine_done(e, t);
}

static void priority_preempts_the_worst_priority(void **state)
{
	(void)state;
	struct sim_engine_config cfg = config(4096);
	struct tracker *t;

	cfg.max_model_len = 4096;
	cfg.policy = SIM_SCHED_PRIORITY;
	struct sim_engine *e = tracked_engine(&cfg, &t);
	add(e, 1000, 0, 1000, 0, NULL, 0);
	add(e, 1000, 1, 1000, 5, NULL, 0);  /* worst priority, not the latest */
	add(e, 1000, 2, 1000, 0, NULL, 0);
	add(e, 1000, 3, 1000, -1, NULL, 0); /* best priority, latest */
	run(e);
	assert_true(t->n_preempt_order > 0);
	assert_int_equal(t->preempt_order[0], 1);
	assert_int_equal(t->preempted[3], 0);
	/* best priority is served first */
	assert_true(t->first_token[3] <= t->first_token[0]);
	for (uint32_t i = 0; i < 4; i++)
		assert_int_equal(t->tokens[i], 1000);
	pool_is_whole_again(e);
	engine_done(e, t);
}

static void priority_orders_the_waiting_queue(void **state)
{
	(void)state;
	struct sim_engine_config cfg = config(646503);
	struct tracker *t;

	cfg.policy = SIM_SCHED_PRIORITY;
	cfg.max_num_seqs = 1; /* one at a time, so the order shows */
	cfg.max_num_batched_tokens = 8192;
	struct sim_engine *e = tracked_engine(&cfg, &t);
	add(e, 100, 0, 2, 3, NULL, 0);
	add(e, 100, 1, 2, 1, NULL, 0);
	add(e, 100, 2, 2, 1, NULL, 0); /* same priority, later arrival than 1 */
	add(e, 100, 3, 2, 2, NULL, 0);
	run(e);
	assert_true(t->first_token[1] < t->first_token[2]);
	assert_true(t->first_token[2] < t->first_token[3]);
	assert_true(t->first_token[3] < t->first_token[0]);
	engine_done(e, t);
}

static void max_num_seqs_caps_the_batch(void **state)
{
	(void)state;
	struct sim_engine_config cfg = config(646503);
	struct tracker *t;

	cfg.max_num_seqs = 4;
	struct sim_engine *e = tracked_engine(&cfg, &t);
	for (uint32_t i = 0; i < 10; i++)
		add(e, 50, i, 20, 0, NULL, 0);
	sim_engine_step_begin(e);
	assert_int_equal(sim_engine_num_running(e), 4);
	assert_int_equal(sim_engine_num_waiting(e), 6);
	sim_engine_step_end(e);
	run(e);
	assert_true(t->first_scheduled[9] > 0); /* waited for a slot */
	engine_done(e, t);
}

/* ---- prefix cache ------------------------------------------------------------------ */

static double ttft_of(struct sim_engine *e, struct tracker *t, uint32_t tag, const char *salt)
{
	double t0 = sim_engine_now(e);
	struct sim_seq *s = add(e, 2000, tag, 1, 0, salt, t0);
	uint64_t id = s->id;

	run(e);
	return t->first_token[id] - t0;
}

static void same_prompt_hits_the_cache_other_salt_does_not(void **state)
{
	(void)state;
	struct fg_cost_model cm = seed_cost_model();
	struct sim_engine_config cfg = config(646503);
	struct tracker *t;
	struct sim_engine *e = tracked_engine(&cfg, &t);
	double pt = cm.prompt_token_s;

	assert_close(ttft_of(e, t, 7, NULL), 2000 * pt, 1e-9);
	/* 2000 tokens = 125 blocks; the last token is always computed, so 124 hit */
	assert_close(ttft_of(e, t, 7, NULL), (2000 - 124 * 16) * pt, 1e-9);
	assert_int_equal(t->cached[1], 1984);
	/* a salt changes the first block's hash, hence every block's */
	assert_close(ttft_of(e, t, 7, "tenant-a"), 2000 * pt, 1e-9);
	assert_int_equal(t->cached[2], 0);
	assert_close(ttft_of(e, t, 7, "tenant-a"), 16 * pt, 1e-9);
	assert_close(ttft_of(e, t, 7, "tenant-b"), 2000 * pt, 1e-9);
	const struct sim_engine_stats *st = sim_engine_stats(e);
	assert_int_equal(st->prefix_cache_queries, 5 * 2000);
	assert_int_equal(st->prefix_cache_hits, 2 * 1984);
	engine_done(e, t);
}

static void shared_prefix_hits_partially(void **state)
{
	(void)state;
	struct sim_engine_config cfg = config(646503);
	struct tracker *t;
	struct sim_engine *e = tracked_engine(&cfg, &t);
	uint32_t *a = prompt_ids(1000, 3), *b = prompt_ids(1000, 3);

	for (uint32_t i = 500; i < 1000; i++)
		b[i] ^= 0x5a5a5a5a; /* diverge after 500 tokens: 31 full blocks shared */
	struct sim_seq_params pa = { .prompt = a, .n_prompt = 1000, .max_tokens = 1 };
	struct sim_seq_params pb = { .prompt = b, .n_prompt = 1000, .max_tokens = 1 };
	sim_engine_add(e, &pa, 0);
	run(e);
	sim_engine_add(e, &pb, sim_engine_now(e));
	run(e);
	assert_int_equal(t->cached[1], 31 * 16);
	free(a);
	free(b);
	engine_done(e, t);
}

static void disabled_prefix_cache_never_hits(void **state)
{
	(void)state;
	struct fg_cost_model cm = seed_cost_model();
	struct sim_engine_config cfg = config(646503);
	struct tracker *t = calloc(1, sizeof(*t));

	cfg.enable_prefix_caching = false;
	struct sim_engine *e = sim_engine_new(&cfg, &cm, track, t);
	ttft_of(e, t, 7, NULL);
	assert_close(ttft_of(e, t, 7, NULL), 2000 * cm.prompt_token_s, 1e-9);
	assert_int_equal(sim_engine_stats(e)->prefix_cache_hits, 0);
	engine_done(e, t);
}

/* ---- lifecycle ------------------------------------------------------------------------ */

static void abort_mid_step_frees_everything(void **state)
{
	(void)state;
	struct sim_engine_config cfg = config(646503);
	struct tracker *t;
	struct sim_engine *e = tracked_engine(&cfg, &t);
	struct sim_seq *a = add(e, 3000, 1, 50, 0, NULL, 0);
	struct sim_seq *b = add(e, 3000, 2, 50, 0, NULL, 0);
	struct sim_seq *w = add(e, 9000, 3, 50, 0, NULL, 0);

	sim_engine_step_begin(e);
	sim_engine_abort(e, a);         /* inside a step: deferred */
	sim_engine_step_end(e);
	assert_int_equal(t->tokens[0], 0);
	sim_engine_abort(e, w);         /* outside a step: immediate */
	(void)b;
	run(e);
	assert_int_equal(t->tokens[1], 50);
	assert_int_equal(t->n_finished, 1);
	assert_int_equal(sim_engine_stats(e)->requests_finished[SIM_FINISH_ABORT], 2);
	pool_is_whole_again(e);
	engine_done(e, t);
}

static void free_with_work_in_flight_does_not_leak(void **state)
{
	(void)state;
	struct fg_cost_model cm = seed_cost_model();
	struct sim_engine_config cfg = config(646503);
	struct sim_engine *e = sim_engine_new(&cfg, &cm, NULL, NULL);

	add(e, 300, 1, 50, 0, "s", 0);
	add(e, 300, 2, 50, 0, NULL, 0);
	sim_engine_step_begin(e);
	sim_engine_free(e); /* ASan's leak check is the assertion */
}

static void bad_configs_are_refused(void **state)
{
	(void)state;
	struct fg_cost_model cm = seed_cost_model();
	struct sim_engine_config cfg = config(4096);

	assert_non_null(sim_engine_config_check(&cfg)); /* 131072 > pool */
	assert_null(sim_engine_new(&cfg, &cm, NULL, NULL));
	cfg.max_model_len = 4096;
	assert_null(sim_engine_config_check(&cfg));
	cfg.max_num_batched_tokens = 10;
	assert_non_null(sim_engine_config_check(&cfg)); /* < max_num_seqs */
	cfg = config(4096);
	cfg.max_model_len = 4096;
	cfg.block_size = 0;
	assert_non_null(sim_engine_config_check(&cfg));
}

/* A fixed mixed workload; returns a fingerprint of every timing and count. */
static void workload(uint64_t seed, double *out, size_t n_out)
{
	struct fg_cost_model cm = seed_cost_model();
	struct sim_engine_config cfg = config(4096);
	struct tracker *t = calloc(1, sizeof(*t));

	cfg.max_model_len = 4096;
	cfg.output_len = SIM_OUTPUT_UNIFORM;
	cfg.seed = seed;
	cfg.max_num_batched_tokens = 2048;
	struct sim_engine *e = sim_engine_new(&cfg, &cm, track, t);
	uint32_t steps = 0;
	for (uint32_t i = 0; i < 40; i++) {
		add(e, 200 + 97 * (i % 13), i % 5, 400, 0, (i % 3) ? NULL : "x", sim_engine_now(e));
		for (uint32_t k = 0; k < 2 && sim_engine_has_work(e); k++) {
			sim_engine_step_begin(e);
			sim_engine_step_end(e);
			steps++;
		}
	}
	steps += run(e);
	const struct sim_engine_stats *st = sim_engine_stats(e);
	size_t k = 0;
	out[k++] = steps;
	out[k++] = sim_engine_now(e);
	out[k++] = (double)st->num_preemptions;
	out[k++] = (double)st->prefix_cache_hits;
	out[k++] = (double)st->generation_tokens;
	out[k++] = (double)st->recomputed_tokens;
	for (uint32_t i = 0; i < 40 && k + 3 <= n_out; i++) {
		out[k++] = t->tokens[i];
		out[k++] = t->first_token[i];
		out[k++] = t->finished[i];
	}
	assert_int_equal(t->n_finished, 40);
	pool_is_whole_again(e);
	engine_done(e, t);
}

static void same_seed_same_schedule(void **state)
{
	(void)state;
	double a[128], b[128], c[128];

	memset(a, 0, sizeof(a));
	memset(b, 0, sizeof(b));
	memset(c, 0, sizeof(c));
	workload(42, a, 128);
	workload(42, b, 128);
	workload(43, c, 128);
	assert_memory_equal(a, b, sizeof(a));
	assert_memory_not_equal(a, c, sizeof(a));
	assert_true(a[2] > 0); /* the workload does exercise preemption */
	assert_true(a[3] > 0); /* and the cache */
}

static void uniform_output_len_stays_in_range(void **state)
{
	(void)state;
	struct sim_engine_config cfg = config(646503);
	struct tracker *t;

	cfg.output_len = SIM_OUTPUT_UNIFORM;
	cfg.seed = 7;
	struct sim_engine *e = tracked_engine(&cfg, &t);
	for (uint32_t i = 0; i < 200; i++)
		add(e, 10, i, 8, 0, NULL, 0);
	run(e);
	uint32_t seen[9] = { 0 };
	for (uint32_t i = 0; i < 200; i++) {
		assert_in_range(t->tokens[i], 1, 8);
		assert_int_equal(t->finish[i], t->tokens[i] == 8 ? SIM_FINISH_LENGTH : SIM_FINISH_STOP);
		seen[t->tokens[i]]++;
	}
	for (uint32_t k = 1; k <= 8; k++)
		assert_true(seen[k] > 5); /* roughly uniform, every length appears */
	engine_done(e, t);
}

/* min_tokens delays a natural stop; ignore_eos removes it. */
static void min_tokens_and_ignore_eos_bound_the_stop(void **state)
{
	(void)state;
	struct sim_engine_config cfg = config(646503);
	struct tracker *t;

	cfg.output_len = SIM_OUTPUT_UNIFORM;
	cfg.seed = 7;
	struct sim_engine *e = tracked_engine(&cfg, &t);
	for (uint32_t i = 0; i < 200; i++) {
		uint32_t *ids = prompt_ids(10, i);
		struct sim_seq_params p = { .prompt = ids, .n_prompt = 10, .max_tokens = 8,
					    .min_tokens = i < 100 ? 6 : 0, .ignore_eos = i >= 100 };
		assert_non_null(sim_engine_add(e, &p, 0));
		free(ids);
	}
	run(e);
	uint32_t at_min = 0;
	for (uint32_t i = 0; i < 100; i++) {
		assert_in_range(t->tokens[i], 6, 8);
		at_min += t->tokens[i] == 6;
	}
	assert_true(at_min > 40); /* the draws below 6 stop at 6 */
	for (uint32_t i = 100; i < 200; i++) {
		assert_int_equal(t->tokens[i], 8);
		assert_int_equal(t->finish[i], SIM_FINISH_LENGTH);
	}
	engine_done(e, t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(lone_prompt_ttft_is_prefill_time),
		cmocka_unit_test(arrival_offsets_ttft),
		cmocka_unit_test(long_prompt_prefills_in_chunks),
		cmocka_unit_test(decode_step_matches_formula),
		cmocka_unit_test(mixed_step_adds_prefill_and_decode),
		cmocka_unit_test(oversubscribed_pool_preempts_and_recomputes),
		cmocka_unit_test(fitting_load_never_preempts),
		cmocka_unit_test(priority_preempts_the_worst_priority),
		cmocka_unit_test(priority_orders_the_waiting_queue),
		cmocka_unit_test(max_num_seqs_caps_the_batch),
		cmocka_unit_test(same_prompt_hits_the_cache_other_salt_does_not),
		cmocka_unit_test(shared_prefix_hits_partially),
		cmocka_unit_test(disabled_prefix_cache_never_hits),
		cmocka_unit_test(abort_mid_step_frees_everything),
		cmocka_unit_test(free_with_work_in_flight_does_not_leak),
		cmocka_unit_test(bad_configs_are_refused),
		cmocka_unit_test(same_seed_same_schedule),
		cmocka_unit_test(uniform_output_len_stays_in_range),
		cmocka_unit_test(min_tokens_and_ignore_eos_bound_the_stop),
	};
	return cmocka_run_group_tests_name("sim_engine", tests, NULL, NULL);
}
