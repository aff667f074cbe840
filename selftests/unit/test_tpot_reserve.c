/* test_tpot_reserve.c — TPOT reservations (policy/tpot_reserve.c) and how the
 * gateway applies them (policy/gateway.c, policy/kv_ledger.c): the batch cap
 * on the cost model, the price, others held while a holder still goes, the
 * holders' KV kept out of others' reach, reloads keeping the books, and the
 * cap on the step model (the measured one under calibration `on`) apart
 * from the prices. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "policy/gateway.h"
#include "policy/kv_ledger.h"
#include "policy/tpot_reserve.h"

#define MS 1000000ull
#define MAX_REQ 400

struct fixture {
	struct fg_policy p;
	struct fg_gateway gw;
	struct fg_gw_request req[MAX_REQ];
	uint32_t n_req;
};

static void add_tier(struct fg_policy *p, const char *name, uint64_t kv_cap, double tpot_ms)
{
	struct fg_tier *t = &p->tiers[p->n_tiers++];
	memset(t, 0, sizeof(*t));
	strcpy(t->name, name);
	t->weight = 1;
	t->max_context = 32768;
	t->kv_cap_tokens = kv_cap;
	t->burst_s = 60;
	t->max_queue_s = 600;
	t->default_max_tokens = 256;
	t->tpot_p99_ms = tpot_ms;
}

static void add_tenant(struct fg_policy *p, const char *name, uint32_t tier)
{
	struct fg_tenant *t = fg_policy_add_tenant(p);
	assert_non_null(t);
	strcpy(t->name, name);
	t->tier = tier;
	t->units_per_s = 1e9; /* quota is not what this tests */
	t->burst_s = 60;
}

/* tenant 0 "lat" in a 12 ms TPOT tier holding up to 16384 tokens of KV;
 * tenant 1 "flood" standard */
static void make_policy(struct fg_policy *p, double tpot_ms)
{
	fg_policy_defaults(p);
	add_tier(p, "latency", 16384, tpot_ms);
	add_tier(p, "standard", 600000, 0);
	add_tenant(p, "lat", 0);
	add_tenant(p, "flood", 1);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	make_policy(&f->p, 12);
	assert_int_equal(fg_gw_init(&f->gw, &f->p, 0, 0), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fg_gw_free(&((struct fixture *)*state)->gw);
	fg_policy_release(&((struct fixture *)*state)->p);
	free(*state);
	return 0;
}

/* A streamed request of `prompt` token ids and `out` max tokens: admitted. */
static struct fg_gw_request *admit(struct fixture *f, uint32_t tenant, uint64_t prompt,
				   uint64_t out, uint64_t now_ns)
{
	struct fg_request_shape s = { .prompt_token_ids = prompt, .max_tokens = out, .n = 1 };
	assert_true(f->n_req < MAX_REQ);
	struct fg_gw_request *r = &f->req[f->n_req++];
	struct fg_gw_decision d = fg_gw_admit(&f->gw, r, tenant, "m", &s, now_ns);
	assert_int_equal(d.outcome, FG_GW_QUEUED);
	r->streams = true;
	return r;
}

/* Dispatch all that may go; each starts at once (its first token), so the
 * engine window's pending prefill never decides. Returns how many went. */
static uint32_t dispatch_all(struct fixture *f, uint32_t tenant_count[2], uint64_t now_ns)
{
	uint32_t n = 0;
	struct fg_gw_request *r;

	while ((r = fg_gw_dispatch(&f->gw, now_ns))) {
		fg_gw_first_token(&f->gw, r, now_ns);
		if (tenant_count)
			tenant_count[r->tenant]++;
		n++;
	}
	return n;
}

static double modeled_step(const struct fixture *f)
{
	return fg_batch_step_s(&f->gw.step_cm, f->gw.tpot.sequences, (double)f->gw.kv.node_reserved,
			       (double)f->gw.ew.pending_tokens);
}

static void seed_model(struct fg_cost_model *cm)
{
	static struct fg_policy p;
	fg_policy_defaults(&p);
	fg_cost_model_init(cm, &p.replica);
}

static void batch_step_is_decode_plus_prefill(void **state)
{
	(void)state;
	struct fg_cost_model cm;
	seed_model(&cm);
	assert_float_equal(fg_batch_step_s(&cm, 128, 128 * 1700.0, 0), cm.decode_step_s, 1e-12);
	assert_float_equal(fg_batch_step_s(&cm, 4, 8000, 500),
			   fg_decode_step_s(&cm, 8000) + fg_prefill_s(&cm, 500), 1e-12);
	/* nothing decoding: no read of the weights, only the prefill */
	assert_float_equal(fg_batch_step_s(&cm, 0, 0, 1000), fg_prefill_s(&cm, 1000), 1e-12);
}

static void cap_is_the_largest_batch_within_the_target(void **state)
{
	(void)state;
	struct fg_cost_model cm;
	seed_model(&cm);

	/* seed replica: 7.02 ms of weights + 32.6 ns per token of context */
	uint32_t b = fg_tpot_batch_within(&cm, 0.012, 1700);
	assert_true(fg_batch_step_s(&cm, b, b * 1700.0, 0) <= 0.012);
	assert_true(fg_batch_step_s(&cm, b + 1, (b + 1) * 1700.0, 0) > 0.012);
	assert_int_equal(b, 89);
	uint64_t c = fg_tpot_context_within(&cm, 0.012, 1700);
	assert_true(fg_batch_step_s(&cm, ceil(c / 1700.0), (double)c, 0) <= 0.012);
	assert_true(fg_batch_step_s(&cm, ceil((c + 1) / 1700.0), (double)c + 1, 0) > 0.012);
	/* below the weights' read nothing fits */
	assert_int_equal(fg_tpot_batch_within(&cm, 0.005, 1700), 0);
	assert_int_equal(fg_tpot_context_within(&cm, 0.005, 1700), 0);
}

static void price_is_the_throughput_forgone(void **state)
{
	(void)state;
	struct fg_cost_model cm;
	seed_model(&cm);

	struct fg_tpot_price p = fg_tpot_price(&cm, 0.012);
	assert_int_equal(p.ref_batch, 128);
	assert_float_equal(p.ref_step_s, cm.decode_step_s, 1e-12);
	assert_float_equal(p.tokens_per_s, p.batch / p.step_s, 1e-9);
	assert_float_equal(p.forgone_share, 1 - p.tokens_per_s / p.ref_tokens_per_s, 1e-12);
	assert_true(p.forgone_share > 0.1 && p.forgone_share < 0.3);
	assert_float_equal(p.usd_per_month, p.forgone_share * 7200, 1e-6);
	/* a tighter target forgoes more */
	assert_true(fg_tpot_price(&cm, 0.009).usd_per_month > p.usd_per_month);
	/* a target the reference batch already keeps forgoes nothing */
	assert_float_equal(fg_tpot_price(&cm, 0.020).forgone_share, 0, 0);
	/* one no batch can keep forgoes the replica */
	assert_float_equal(fg_tpot_price(&cm, 0.005).usd_per_month, 7200, 1e-6);
}

static void kv_reserve_kept_for_the_protected(void **state)
{
	(void)state;
	static struct fg_kv_ledger l;
	assert_int_equal(fg_kv_init(&l, 100000, 1, 2), 0);
	fg_kv_set_protected(&l, 0, true);
	fg_kv_set_reserve(&l, 20000);

	assert_int_equal(fg_kv_check(&l, 1, 80001), FG_KV_NEVER_NODE);
	assert_int_equal(fg_kv_reserve(&l, 1, 70000), FG_KV_OK);
	assert_int_equal(fg_kv_check(&l, 1, 10001), FG_KV_WAIT_NODE);
	assert_int_equal(fg_kv_reserve(&l, 1, 10000), FG_KV_OK);
	/* the others are at their edge; the protected still have their 20000 */
	assert_int_equal(fg_kv_reserve(&l, 0, 15000), FG_KV_OK);
	assert_int_equal(l.protected_reserved, 15000);
	assert_int_equal(fg_kv_check(&l, 1, 1), FG_KV_WAIT_NODE);
	assert_int_equal(fg_kv_reserve(&l, 0, 5000), FG_KV_OK);
	assert_int_equal(fg_kv_check(&l, 0, 1), FG_KV_WAIT_NODE);
	/* the protected past their reserve use the pool like anyone */
	fg_kv_release(&l, 1, 30000);
	assert_int_equal(fg_kv_reserve(&l, 0, 25000), FG_KV_OK);
	assert_int_equal(l.protected_reserved, 45000);
	/* unprotecting and recounting keep the books straight */
	fg_kv_set_protected(&l, 0, false);
	assert_int_equal(l.protected_reserved, 0);
	fg_kv_set_protected(&l, 0, true);
	l.protected_reserved = 7;
	fg_kv_recount_protected(&l);
	assert_int_equal(l.protected_reserved, 45000);
	fg_kv_release(&l, 0, 1000000); /* clamped, never wraps */
	assert_int_equal(l.protected_reserved, 0);
	assert_int_equal(l.node_reserved, 50000);
	fg_kv_free(&l);
}

static void gateway_configures_from_the_tightest_tier(void **state)
{
	struct fixture *f = *state;
	struct fg_tpot_reserve *r = &f->gw.tpot;

	assert_true(fg_tpot_active(r));
	assert_float_equal(r->target_s, 0.012, 1e-12);
	assert_true(fg_tpot_is_holder(r, 0));
	assert_false(fg_tpot_is_holder(r, 1));
	assert_int_equal(r->holders, 1);
	assert_int_equal(r->reserve_tokens, 16384);
	assert_int_equal(r->cap_tokens, fg_tpot_context_within(&f->gw.cm, 0.012, 1700));
	assert_true(f->gw.kv.protect[0] && !f->gw.kv.protect[1]);
	assert_int_equal(f->gw.kv.reserve, 16384);

	/* a second, tighter TPOT tier sets the replica's target */
	add_tier(&f->p, "tighter", 8192, 10);
	add_tenant(&f->p, "lat2", 2);
	fg_gw_reload(&f->gw, &f->p, 0);
	assert_float_equal(r->target_s, 0.010, 1e-12);
	assert_int_equal(r->holders, 2);
	assert_int_equal(r->reserve_tokens, 16384 + 8192);

	/* a policy without one: nothing reserved, nothing capped */
	struct fg_policy *p = calloc(1, sizeof(*p));
	make_policy(p, 0);
	fg_gw_reload(&f->gw, p, 0);
	assert_false(fg_tpot_active(r));
	assert_int_equal(f->gw.kv.reserve, 0);
	assert_false(f->gw.kv.protect[0]);
	fg_gw_free(&f->gw);
	fg_gw_init(&f->gw, &f->p, 0, 0); /* before p goes */
	fg_policy_free(p);
}

/* The flood fills the batch up to the target less the holder's reserve and
 * no further; the holder's request, queued behind the flood's, still goes;
 * the modeled step stays within the target throughout. */
static void others_held_at_the_cap_while_the_holder_goes(void **state)
{
	struct fixture *f = *state;
	uint32_t went[2] = { 0 };

	for (int i = 0; i < 200; i++)
		admit(f, 1, 100, 1900, 0); /* 2000 tokens of context each */
	dispatch_all(f, went, 1 * MS);
	/* as many as fit beside the 16384 kept for the holder, in 2000s, each
	 * with its 100-token prompt as the next step's prefill */
	uint32_t want = 0;
	while (fg_batch_step_s(&f->gw.cm, want + 1, (want + 1) * 2000.0 + 16384, 100) <= 0.012)
		want++;
	assert_int_equal(went[1], want);
	assert_true(want > 5);
	assert_true(fg_batch_step_s(&f->gw.cm, f->gw.tpot.sequences,
				    (double)f->gw.kv.node_reserved + 16384, 0) <= 0.012);
	assert_true(fg_fq_total_queued(&f->gw.fq) > 0);

	/* the holder arrives after all of them and goes at once, four times */
	for (int i = 0; i < 4; i++)
		admit(f, 0, 50, 1800, 2 * MS);
	went[0] = went[1] = 0;
	dispatch_all(f, went, 2 * MS);
	assert_int_equal(went[0], 4);
	assert_int_equal(went[1], 0);
	assert_true(modeled_step(f) <= 0.012);
	assert_int_equal(f->gw.kv.protected_reserved, 4 * 1850);

	/* a flood request ends: one of its next goes, not more */
	struct fg_usage u = { .prompt_tokens = 100, .completion_tokens = 1900 };
	struct fg_gw_request *flood_sent = NULL;
	for (uint32_t i = 0; i < f->n_req && !flood_sent; i++)
		if (f->req[i].tenant == 1 && f->req[i].state == FG_GW_S_STARTED)
			flood_sent = &f->req[i];
	assert_non_null(flood_sent);
	uint32_t seqs = f->gw.tpot.sequences;
	fg_gw_finish(&f->gw, flood_sent, &u, 3 * MS);
	assert_int_equal(f->gw.tpot.sequences, seqs - 1);
	went[0] = went[1] = 0;
	dispatch_all(f, went, 3 * MS);
	assert_int_equal(went[1], 1);
	assert_true(modeled_step(f) <= 0.012);
}

/* A measured step slower than the policy's (3 ms a step more, the
 * weights and KV read at 0.62/0.75 of the rate, prompts at 0.38/0.50)
 * shrinks the cap at once and holds the flood to fewer sequences (a 20 ms
 * target); the
 * prices stay what they were; back on the assumed model the cap is the
 * policy's again. */
static void slower_step_model_shrinks_the_cap_not_the_prices(void **state)
{
	struct fixture *f = *state;
	f->p.tiers[0].tpot_p99_ms = 20; /* room for a 100-token prompt on the slower engine */
	fg_gw_free(&f->gw);
	fg_gw_init(&f->gw, &f->p, 0, 0);
	const struct fg_cost_model assumed = f->gw.cm;
	uint64_t cap_assumed = f->gw.tpot.cap_tokens;
	struct fg_cost_model slow;
	double mbu = 0.62 / 0.75, gpus = assumed.gpus;
	double per_ctx = assumed.kv_bytes_per_token / gpus / (assumed.hbm_effective_per_gpu * mbu);
	double fixed = 0.003 + assumed.weights_bytes_per_gpu / (assumed.hbm_effective_per_gpu * mbu);
	fg_cost_model_calibrated(&slow, &assumed, assumed.prompt_token_s * 0.50 / 0.38, fixed, 0,
				 per_ctx);
	assert_true(fg_batch_step_s(&slow, 8, 16000, 100) > fg_batch_step_s(&assumed, 8, 16000, 100));

	fg_gw_set_step_model(&f->gw, &slow);
	assert_int_equal(f->gw.tpot.cap_tokens, fg_tpot_context_within(&slow, 0.020, 1700));
	assert_true(f->gw.tpot.cap_tokens < cap_assumed);
	assert_memory_equal(&f->gw.cm, &assumed, sizeof(assumed)); /* prices untouched */

	uint32_t went[2] = { 0 };
	for (int i = 0; i < 200; i++)
		admit(f, 1, 100, 1900, 0);
	dispatch_all(f, went, 1 * MS);
	uint32_t want_slow = 0, want_assumed = 0;
	while (fg_batch_step_s(&slow, want_slow + 1, (want_slow + 1) * 2000.0 + 16384, 100) <= 0.020)
		want_slow++;
	while (fg_batch_step_s(&assumed, want_assumed + 1, (want_assumed + 1) * 2000.0 + 16384,
			       100) <= 0.020)
		want_assumed++;
	assert_int_equal(went[1], want_slow);
	assert_true(want_slow > 0 && want_slow < want_assumed);
	assert_true(modeled_step(f) <= 0.020);

	/* back on the policy's model (calibration advise): the cap follows at once */
	fg_gw_set_step_model(&f->gw, &assumed);
	assert_int_equal(f->gw.tpot.cap_tokens, cap_assumed);
	went[0] = went[1] = 0;
	dispatch_all(f, went, 2 * MS);
	assert_int_equal(went[1], want_assumed - want_slow);
	/* and a reload starts from the policy's model */
	fg_gw_set_step_model(&f->gw, &slow);
	fg_gw_reload(&f->gw, &f->p, 3 * MS);
	assert_memory_equal(&f->gw.step_cm, &assumed, sizeof(assumed));
	assert_int_equal(f->gw.tpot.cap_tokens, cap_assumed);
}

/* Without the reservation the same flood takes the batch to the window's and
 * the pool's limits, and the modeled step goes past the target. */
static void without_reservation_the_flood_grows_the_step(void **state)
{
	struct fixture *f = *state;
	struct fg_policy *p = calloc(1, sizeof(*p));
	make_policy(p, 0);
	fg_gw_free(&f->gw);
	fg_gw_init(&f->gw, p, 0, 0);

	for (int i = 0; i < 200; i++)
		admit(f, 1, 100, 1900, 0);
	uint32_t n = dispatch_all(f, NULL, 1 * MS);
	assert_true(n > 200 * 0.9);
	assert_true(modeled_step(f) > 0.012);
	fg_gw_free(&f->gw);
	fg_gw_init(&f->gw, &f->p, 0, 0);
	fg_policy_free(p);
}

/* Prompts sent and not started count in the step: while one is pending a
 * second does not go if the two together pass the slack. */
static void pending_prefill_counts_in_the_step(void **state)
{
	struct fixture *f = *state;

	/* 7.0 ms of weights + (12 x 2000 + 16384) x 32.6 ns = 8.3 ms: ~3.7 ms
	 * of slack, ~100 prompt tokens at 35.7 us */
	for (int i = 0; i < 12; i++)
		admit(f, 1, 100, 1900, 0);
	assert_int_equal(dispatch_all(f, NULL, 1 * MS), 12);
	struct fg_gw_request *a = admit(f, 1, 100, 100, 2 * MS);
	struct fg_gw_request *b = admit(f, 1, 100, 100, 2 * MS);
	assert_ptr_equal(fg_gw_dispatch(&f->gw, 2 * MS), a);
	assert_int_equal(f->gw.ew.pending_tokens, 100);
	/* a's 100 pending + b's context and prompt: still fits? the step says */
	double with_b = fg_batch_step_s(&f->gw.cm, f->gw.tpot.sequences + 1,
					(double)(f->gw.kv.node_reserved + b->kv_tokens + 16384), 200);
	struct fg_gw_request *next = fg_gw_dispatch(&f->gw, 2 * MS);
	assert_true((next == b) == (with_b <= 0.012));
	if (!next) {
		fg_gw_first_token(&f->gw, a, 3 * MS); /* a's prefill done */
		assert_ptr_equal(fg_gw_dispatch(&f->gw, 3 * MS), b);
	}
}

/* A prompt whose prefill alone misses the target goes when no other prompt
 * waits to start (one long step), not never; a second waits for the first. */
static void prompt_larger_than_any_slack_goes_alone(void **state)
{
	struct fixture *f = *state;

	admit(f, 1, 100, 900, 0);
	assert_int_equal(dispatch_all(f, NULL, 1 * MS), 1);
	/* 1,000 tokens x 35.65 us = 35.7 ms of prefill: above 12 ms on any batch */
	struct fg_gw_request *a = admit(f, 1, 1000, 100, 2 * MS);
	struct fg_gw_request *b = admit(f, 1, 1000, 100, 2 * MS);
	assert_ptr_equal(fg_gw_dispatch(&f->gw, 2 * MS), a);
	assert_null(fg_gw_dispatch(&f->gw, 2 * MS));
	fg_gw_first_token(&f->gw, a, 3 * MS);
	assert_ptr_equal(fg_gw_dispatch(&f->gw, 3 * MS), b);
}

/* A holder at its own KV cap waits for its own requests, not for others'
 * (who are held by the batch meanwhile). */
static void holder_at_its_own_kv_cap_waits_for_its_own(void **state)
{
	struct fixture *f = *state;

	/* the holder fills its reserve and more, then the flood fills the rest */
	for (int i = 0; i < 8; i++)
		admit(f, 0, 100, 1900, 0); /* 16000 */
	dispatch_all(f, NULL, 1 * MS);
	for (int i = 0; i < 200; i++)
		admit(f, 1, 100, 1900, 1 * MS);
	dispatch_all(f, NULL, 1 * MS);
	struct fg_gw_request *h = admit(f, 0, 100, 300, 2 * MS); /* past its kv cap? 16000+400 */
	/* at its own KV cap (16384): skipped, the flood still held by the batch */
	assert_null(fg_gw_dispatch(&f->gw, 2 * MS));
	/* one of its own ends: it goes */
	struct fg_usage u = { .prompt_tokens = 100, .completion_tokens = 1900 };
	fg_gw_finish(&f->gw, &f->req[0], &u, 3 * MS);
	assert_ptr_equal(fg_gw_dispatch(&f->gw, 3 * MS), h);
}

static void reload_keeps_sequences_and_holders_books(void **state)
{
	struct fixture *f = *state;

	for (int i = 0; i < 3; i++)
		admit(f, 0, 100, 900, 0);
	for (int i = 0; i < 5; i++)
		admit(f, 1, 100, 900, 0);
	dispatch_all(f, NULL, 1 * MS);
	assert_int_equal(f->gw.tpot.sequences, 8);
	assert_int_equal(f->gw.kv.protected_reserved, 3000);
	fg_gw_reload(&f->gw, &f->p, 2 * MS);
	assert_int_equal(f->gw.tpot.sequences, 8);
	assert_int_equal(f->gw.kv.protected_reserved, 3000);
	struct fg_usage u = { .prompt_tokens = 100, .completion_tokens = 900 };
	for (uint32_t i = 0; i < f->n_req; i++)
		fg_gw_finish(&f->gw, &f->req[i], &u, 3 * MS);
	assert_int_equal(f->gw.tpot.sequences, 0);
	assert_int_equal(f->gw.kv.protected_reserved, 0);
	assert_int_equal(f->gw.kv.node_reserved, 0);
}

static int parse(const char *text, struct fg_policy *p, struct fg_policy_error *err)
{
	return fg_policy_parse_buffer(text, strlen(text), "t.yaml", p, err);
}

static void policy_key_parsed_and_checked(void **state)
{
	(void)state;
	struct fg_policy *p = calloc(1, sizeof(*p));
	struct fg_policy_error err;

	assert_int_equal(parse("tiers: {lat: {max_context: 8192, kv_cap_tokens: 16384, tpot_p99_ms: 12.5}, std: {}}\n"
			       "tenants: [{name: a, tier: lat, units_per_s: 10}]\n", p, &err), 0);
	assert_float_equal(p->tiers[0].tpot_p99_ms, 12.5, 0);
	assert_float_equal(p->tiers[1].tpot_p99_ms, 0, 0);

	/* zero or negative is not a target */
	assert_int_not_equal(parse("tiers: {lat: {tpot_p99_ms: 0}}\ntenants: []\n", p, &err), 0);
	assert_non_null(strstr(err.message, "tpot_p99_ms"));
	assert_int_not_equal(parse("tiers: {lat: {tpot_p99_ms: -3}}\ntenants: []\n", p, &err), 0);
	assert_int_not_equal(parse("tiers: {lat: {tpot_p99_ms: fast}}\ntenants: []\n", p, &err), 0);

	/* one sequence of the tier's longest context alone takes 7.29 ms on the
	 * seed replica: 7 ms cannot be kept, and the message says why */
	assert_int_not_equal(parse("tiers: {lat: {max_context: 8192, kv_cap_tokens: 16384, tpot_p99_ms: 7}}\n"
				   "tenants: []\n", p, &err), 0);
	assert_int_equal(err.line, 1);
	assert_non_null(strstr(err.message, "7.29 ms"));
	assert_non_null(strstr(err.message, "max_context"));
	/* the same target holds for a shorter context */
	assert_int_equal(parse("tiers: {lat: {max_context: 1024, tpot_p99_ms: 7.1}}\ntenants: []\n", p, &err), 0);
	fg_policy_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(batch_step_is_decode_plus_prefill),
		cmocka_unit_test(cap_is_the_largest_batch_within_the_target),
		cmocka_unit_test(price_is_the_throughput_forgone),
		cmocka_unit_test(kv_reserve_kept_for_the_protected),
		cmocka_unit_test(policy_key_parsed_and_checked),
		cmocka_unit_test_setup_teardown(gateway_configures_from_the_tightest_tier, setup, teardown),
		cmocka_unit_test_setup_teardown(others_held_at_the_cap_while_the_holder_goes, setup, teardown),
		cmocka_unit_test_setup_teardown(slower_step_model_shrinks_the_cap_not_the_prices, setup, teardown),
		cmocka_unit_test_setup_teardown(without_reservation_the_flood_grows_the_step, setup, teardown),
		cmocka_unit_test_setup_teardown(pending_prefill_counts_in_the_step, setup, teardown),
		cmocka_unit_test_setup_teardown(prompt_larger_than_any_slack_goes_alone, setup, teardown),
		cmocka_unit_test_setup_teardown(holder_at_its_own_kv_cap_waits_for_its_own, setup, teardown),
		cmocka_unit_test_setup_teardown(reload_keeps_sequences_and_holders_books, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
