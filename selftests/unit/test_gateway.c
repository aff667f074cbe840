/* test_gateway.c — a request's life at the gateway (policy/gateway.c):
 * admission outcomes, fair dispatch under KV caps and the engine window,
 * settlement and refunds, queue timeouts, reload keeping state. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "policy/gateway.h"
#include "policy/overload.h"

#define NS 1000000000ull
#define MS 1000000ull

struct fixture {
	struct fg_policy p;
	struct fg_gateway gw;
};

static void add_tier(struct fg_policy *p, const char *name, double weight, uint64_t max_ctx,
		     uint64_t kv_cap, double max_queue_s)
{
	struct fg_tier *t = &p->tiers[p->n_tiers++];
	memset(t, 0, sizeof(*t));
	strcpy(t->name, name);
	t->weight = weight;
	t->max_context = max_ctx;
	t->kv_cap_tokens = kv_cap;
	t->burst_s = 60;
	t->max_queue_s = max_queue_s;
	t->default_max_tokens = 256;
}

static void add_tenant(struct fg_policy *p, const char *name, uint32_t tier, double units_per_s)
{
	struct fg_tenant *t = fg_policy_add_tenant(p);
	assert_non_null(t);
	strcpy(t->name, name);
	t->tier = tier;
	t->units_per_s = units_per_s;
	t->burst_s = p->tiers[tier].burst_s;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	fg_policy_defaults(&f->p);
	add_tier(&f->p, "standard", 1, 32768, 131072, 30);
	add_tier(&f->p, "premium", 2, 131072, 262144, 30);
	add_tenant(&f->p, "acme", 1, 9000);
	add_tenant(&f->p, "globex", 0, 1000);
	f->p.agent.long_context_threshold = 32768;
	assert_int_equal(fg_gw_init(&f->gw, &f->p, 8192, 0), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	fg_gw_free(&f->gw);
	fg_policy_release(&f->p);
	free(f);
	return 0;
}

static struct fg_request_shape shape(uint64_t chars, uint64_t max_tokens, uint32_t n)
{
	struct fg_request_shape s = { .prompt_chars = chars, .max_tokens = max_tokens, .n = n };
	return s;
}

static void admit_price_and_settle_refund(void **state)
{
	struct fixture *f = *state;
	struct fg_gateway *gw = &f->gw;
	struct fg_gw_request r;
	struct fg_request_shape s = shape(8000, 500, 1); /* 2000 tokens at 4 chars/token */

	double before = fg_bucket_level(&gw->t[0].bucket, 0);
	struct fg_gw_decision d = fg_gw_admit(gw, &r, 0, "m", &s, 0);
	assert_int_equal(d.outcome, FG_GW_QUEUED);
	assert_true(fabs(r.price.prompt_tokens - 2000) < 1e-9);
	/* priced by context: 499 decode steps from 2,001 tokens, 3.5963 units
	 * each on average (2,000 + 500 x 3.09 if priced flat) */
	assert_true(fabs(d.cost - 3794.533) < 1e-3);
	assert_int_equal(r.kv_tokens, 2500);
	assert_true(fabs(gw->t[0].reserved_units - d.cost) < 1e-6);
	assert_ptr_equal(fg_gw_dispatch(gw, 1 * MS), &r);
	assert_int_equal(gw->kv.reserved[0], 2500);
	fg_gw_output(gw, &r, 10, 2 * MS);
	assert_int_equal(gw->ew.pending_requests, 0);
	/* the engine produced 100 of the 500 reserved tokens, 1000 cached */
	struct fg_usage u = { .prompt_tokens = 2000, .cached_tokens = 1000, .completion_tokens = 100 };
	double billed = fg_gw_finish(gw, &r, &u, 3 * MS);
	/* 1,000 + 1,000 x 0.1 + 99 steps from 2,001 to 2,099 at t(2,050) */
	assert_true(fabs(billed - 1437.920) < 1e-3);
	assert_int_equal(gw->kv.reserved[0], 0);
	assert_int_equal(gw->kv.node_reserved, 0);
	assert_true(gw->t[0].reserved_units == 0);
	/* refunded the difference: the level is down by what was billed only
	 * (plus 3 ms of refill) */
	double after = fg_bucket_level(&gw->t[0].bucket, 3 * MS);
	assert_true(fabs((before - after) - billed) < 9000 * 0.003 + 1e-6);
	/* the fair queue was charged exactly what was billed */
	assert_true(fabs(gw->fq.t[0].served_units - billed) < 1e-6);
	assert_int_equal(gw->t[0].inflight, 0);
	assert_null(gw->live);

	/* an engine that reports an impossible prompt is not believed past what
	 * the request's 8,000 bytes can make */
	assert_int_equal(fg_gw_admit(gw, &r, 0, "m", &s, 4 * MS).outcome, FG_GW_QUEUED);
	assert_true(fabs(r.price.prompt_ceiling - (8000 + FG_PROMPT_SLACK)) < 1e-9);
	assert_ptr_equal(fg_gw_dispatch(gw, 4 * MS), &r);
	struct fg_usage liar = { .prompt_tokens = 1e9, .completion_tokens = 100 };
	billed = fg_gw_finish(gw, &r, &liar, 5 * MS);
	/* ... and its output is priced from that context: 99 steps from 8,033 */
	assert_true(fabs(billed - (8000 + FG_PROMPT_SLACK +
				   fg_output_units(&gw->cm, 8000 + FG_PROMPT_SLACK, 100, 1))) < 1e-6);
	assert_int_equal(gw->t[0].usage_clamped, 1);
}

static void refusals_say_why(void **state)
{
	struct fixture *f = *state;
	struct fg_gateway *gw = &f->gw;
	struct fg_gw_request r;
	struct fg_gw_decision d;

	/* standard tier: max_context 32768 */
	struct fg_request_shape big = shape(4 * 40000, 100, 1);
	d = fg_gw_admit(gw, &r, 1, "m", &big, 0);
	assert_int_equal(d.outcome, FG_GW_CONTEXT_EXCEEDED);
	assert_non_null(strstr(d.reason, "tier 'standard'"));
	/* premium may go to 100K, but above the 32K threshold with no pool */
	d = fg_gw_admit(gw, &r, 0, "m", &big, 0);
	assert_int_equal(d.outcome, FG_GW_NO_LONG_POOL);
	assert_non_null(strstr(d.reason, "no long-context pool"));
	/* with a pool it is routed there, admitted, and not queued */
	strcpy(f->p.agent.long_context_upstream.host, "127.0.0.1");
	f->p.agent.long_context_upstream.port = 9;
	d = fg_gw_admit(gw, &r, 0, "m", &big, 0);
	assert_int_equal(d.outcome, FG_GW_LONG_CONTEXT);
	assert_int_equal(fg_fq_total_queued(&gw->fq), 0);
	fg_gw_abort(gw, &r, 0);
	/* n = 9 x (20000 + 12000) = 288000 tokens of KV > premium's cap 262144 */
	struct fg_request_shape wide = shape(4 * 20000, 12000, 9);
	d = fg_gw_admit(gw, &r, 0, "m", &wide, 0);
	assert_int_equal(d.outcome, FG_GW_KV_NEVER);
	assert_non_null(strstr(d.reason, "per-tenant KV cap"));
	/* globex: 1000 units/s x 60 s = 60000 units; 8 x 3,999 decode steps */
	struct fg_request_shape costly = shape(400, 4000, 8);
	d = fg_gw_admit(gw, &r, 1, "m", &costly, 0);
	assert_int_equal(d.outcome, FG_GW_BUCKET_NEVER);
	assert_non_null(strstr(d.reason, "can ever hold"));
	assert_int_equal(gw->t[1].admitted, 0);
	assert_true(gw->t[1].reserved_units == 0);
	assert_null(gw->live);
}

static void retry_after_from_refill(void **state)
{
	struct fixture *f = *state;
	struct fg_gateway *gw = &f->gw;
	static struct fg_gw_request rs[64];
	struct fg_request_shape s = shape(4000, 1000, 1); /* 1000 + 999 x 2.91 = ~3,908 units */
	int admitted = 0;
	struct fg_gw_decision d;

	/* globex: 60000-unit burst, 1000 units/s */
	for (;;) {
		d = fg_gw_admit(gw, &rs[admitted], 1, "m", &s, 0);
		if (d.outcome != FG_GW_QUEUED)
			break;
		admitted++;
	}
	assert_int_equal(admitted, (int)(60000 / d.cost));
	assert_int_equal(d.outcome, FG_GW_RETRY_LATER);
	double missing = d.cost - fg_bucket_level(&gw->t[1].bucket, 0);
	double refill = missing / 1000, slot = d.cost / 1000;
	/* the refill, stretched by at most FG_RETRY_SPREAD */
	assert_true((double)d.wait_ns / 1e9 >= refill - 1e-6);
	assert_true((double)d.wait_ns / 1e9 <= refill * (1 + FG_RETRY_SPREAD) + 1e-6);
	assert_true(fg_retry_after_s(d.wait_ns) >= 1);
	/* the clients refused after it are told their turns, one refill of a
	 * request apart, not the same moment */
	for (int k = 1; k <= 20; k++) {
		struct fg_gw_request extra;
		struct fg_gw_decision e = fg_gw_admit(gw, &extra, 1, "m", &s, 0);
		assert_int_equal(e.outcome, FG_GW_RETRY_LATER);
		double turn = refill + k * slot, got = (double)e.wait_ns / 1e9;
		assert_true(got >= turn - 1e-6);
		assert_true(got <= turn + slot + 1e-6);
	}
	/* a request that would not fit before refill opens a deny window that
	 * ends when a typical request fits again */
	uint64_t until = fg_gw_deny_until(gw, 1, 0);
	assert_true(until > 0 && until <= d.wait_ns + 1);
	for (int i = 0; i < admitted; i++)
		fg_gw_abort(gw, &rs[i], 0);
	/* aborted before running: everything refunded */
	assert_true(fabs(fg_bucket_level(&gw->t[1].bucket, 0) - 60000) < 1e-6);
	assert_int_equal(fg_gw_deny_until(gw, 1, 0), 0);
	assert_int_equal(fg_fq_total_queued(&gw->fq), 0);
}

static void kv_cap_makes_tenant_wait_not_others(void **state)
{
	struct fixture *f = *state;
	struct fg_gateway *gw = &f->gw;
	static struct fg_gw_request big[4], small;
	/* premium: KV cap 262144; each 100K-token... keep under max_context:
	 * 30000 prompt + 2000 out = 32000 tokens (below the 32K threshold) */
	struct fg_request_shape s = shape(4 * 30000, 2000, 4); /* kv = 4 x 32000 = 128000 */
	/* each is priced at 30,000 + 4 x 1,999 steps around 31,000 tokens of
	 * context = 269,009 units: a bucket that holds three, since this test
	 * is about KV */
	fg_bucket_init(&gw->t[0].bucket, 9000, 3 * 270000, 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(fg_gw_admit(gw, &big[i], 0, "m", &s, 0).outcome, FG_GW_QUEUED);
	/* first goes alone (window), then the engine starts it */
	struct fg_gw_request *r = fg_gw_dispatch(gw, 0);
	assert_ptr_equal(r, &big[0]);
	fg_gw_first_token(gw, r, 1);
	r = fg_gw_dispatch(gw, 1);
	assert_ptr_equal(r, &big[1]);
	fg_gw_first_token(gw, r, 2);
	/* 256000 of 262144 held: the third waits for the cap */
	assert_null(fg_gw_dispatch(gw, 3));
	struct fg_request_shape sm = shape(400, 100, 1);
	assert_int_equal(fg_gw_admit(gw, &small, 1, "m", &sm, 3).outcome, FG_GW_QUEUED);
	assert_ptr_equal(fg_gw_dispatch(gw, 4), &small);
	struct fg_request_shape sm2 = shape(400, 100, 1);
	static struct fg_gw_request small2;
	assert_int_equal(fg_gw_admit(gw, &small2, 1, "m", &sm2, 4).outcome, FG_GW_QUEUED);
	assert_ptr_equal(fg_gw_dispatch(gw, 4), &small2); /* 200 more prefill tokens fit */
	fg_gw_first_token(gw, &small, 5);
	fg_gw_first_token(gw, &small2, 5);
	struct fg_usage u = { .prompt_tokens = 30000, .completion_tokens = 2000 };
	/* big[2] still waits: the window holds nothing but the cap does */
	assert_null(fg_gw_dispatch(gw, 5));
	fg_gw_finish(gw, &big[0], &u, 5);
	assert_ptr_equal(fg_gw_dispatch(gw, 6), &big[2]);
	fg_gw_abort(gw, &big[1], 7);
	fg_gw_abort(gw, &big[2], 7);
	fg_gw_abort(gw, &small, 7);
	fg_gw_abort(gw, &small2, 7);
	assert_int_equal(gw->kv.node_reserved, 0);
	assert_int_equal(gw->ew.pending_requests, 0);
	assert_int_equal(gw->ew.pending_tokens, 0);
}

/* A prompt larger than the whole engine window goes in its turn while a
 * neighbour's requests are pending (before issue #20 it needed the window
 * empty, which a busy neighbour never allowed: it starved). */
static void large_prompt_goes_in_its_turn(void **state)
{
	struct fixture *f = *state;
	struct fg_gateway *gw = &f->gw;
	static struct fg_gw_request s1, s2, big;
	struct fg_request_shape small = shape(4 * 1000, 10, 1), large = shape(4 * 20000, 10, 1);

	assert_true(fg_ew_budget_tokens(&gw->ew) < 20000);
	assert_int_equal(fg_gw_admit(gw, &s1, 1, "m", &small, 0).outcome, FG_GW_QUEUED);
	assert_ptr_equal(fg_gw_dispatch(gw, 0), &s1);
	assert_int_equal(fg_gw_admit(gw, &big, 0, "m", &large, 1).outcome, FG_GW_QUEUED);
	assert_int_equal(fg_gw_admit(gw, &s2, 1, "m", &small, 1).outcome, FG_GW_QUEUED);
	/* acme came back lifted to globex's counter; the tie goes to acme */
	assert_ptr_equal(fg_gw_dispatch(gw, 2), &big);
	/* the window is full now: globex waits for it, not for acme's turn */
	assert_null(fg_gw_dispatch(gw, 3));
	fg_gw_first_token(gw, &big, 4);
	assert_ptr_equal(fg_gw_dispatch(gw, 5), &s2);
	fg_gw_abort(gw, &s1, 6);
	fg_gw_abort(gw, &s2, 6);
	fg_gw_abort(gw, &big, 6);
	assert_int_equal(gw->ew.pending_requests, 0);
	assert_int_equal(gw->ew.inflight, 0);
}

/* The engine refused it: the tenant pays nothing, but the fair queue keeps
 * the prompt it was charged at dispatch, so a tenant whose requests are all
 * refused cannot go first for ever. */
static void refused_request_costs_its_turn(void **state)
{
	struct fixture *f = *state;
	struct fg_gateway *gw = &f->gw;
	static struct fg_gw_request r, q, n;
	struct fg_request_shape s = shape(4 * 1000, 10, 1);

	double level = fg_bucket_level(&gw->t[1].bucket, 0);
	assert_int_equal(fg_gw_admit(gw, &r, 1, "m", &s, 0).outcome, FG_GW_QUEUED);
	assert_int_equal(fg_gw_admit(gw, &q, 1, "m", &s, 0).outcome, FG_GW_QUEUED);
	assert_ptr_equal(fg_gw_dispatch(gw, 0), &r);
	double charged = gw->fq.t[1].vtc;
	assert_true(fabs(charged - 1000) < 1e-6);
	/* acme arrives, lifted to globex's counter */
	assert_int_equal(fg_gw_admit(gw, &n, 0, "m", &s, 1 * MS).outcome, FG_GW_QUEUED);
	fg_gw_abort(gw, &r, 1 * MS); /* e.g. a 404 from the engine */
	assert_true(fabs(gw->fq.t[1].vtc - charged) < 1e-9);
	double level_now = fg_bucket_level(&gw->t[1].bucket, 1 * MS);
	/* r refunded in full: only q's reservation is out (plus 1 ms of refill) */
	assert_true(fabs(level_now - (level - q.price.units)) < 1000 * 0.001 + 1e-6);
	assert_true(gw->t[1].billed_units == 0);
	assert_int_equal(gw->t[1].aborted, 1);
	/* refunded to the fair queue too, globex would go again before acme */
	assert_ptr_equal(fg_gw_dispatch(gw, 2 * MS), &n);
	fg_gw_abort(gw, &q, 3 * MS); /* still queued: never charged */
	assert_true(fabs(gw->fq.t[1].vtc - charged) < 1e-9);
	fg_gw_abort(gw, &n, 3 * MS);
	assert_true(fabs(fg_bucket_level(&gw->t[1].bucket, 3 * MS) - level) < 1e-6);
}

/* The next request waits for the node's KV pool: the others are held
 * rather than let through to take what frees up. */
static void node_kv_wait_holds_the_others(void **state)
{
	struct fixture *f = *state;
	struct fg_gateway *gw = &f->gw;
	static struct fg_gw_request g[4], big;
	struct fg_request_shape s = shape(4 * 11990, 10, 1), large = shape(4 * 19990, 10, 1);

	gw->kv.node_cap = 50000;
	for (int i = 0; i < 3; i++) {
		assert_int_equal(fg_gw_admit(gw, &g[i], 1, "m", &s, 0).outcome, FG_GW_QUEUED);
		assert_ptr_equal(fg_gw_dispatch(gw, 0), &g[i]);
		fg_gw_first_token(gw, &g[i], 0);
	}
	assert_int_equal(gw->kv.node_reserved, 36000);
	assert_int_equal(fg_gw_admit(gw, &big, 0, "m", &large, 1).outcome, FG_GW_QUEUED);
	assert_int_equal(fg_gw_admit(gw, &g[3], 1, "m", &s, 1).outcome, FG_GW_QUEUED);
	/* acme's 20,000 do not fit the 14,000 left; globex's 12,000 would */
	assert_null(fg_gw_dispatch(gw, 2));
	struct fg_usage u = { .prompt_tokens = 11990, .completion_tokens = 10 };
	fg_gw_finish(gw, &g[0], &u, 3);
	assert_ptr_equal(fg_gw_dispatch(gw, 4), &big);
	fg_gw_first_token(gw, &big, 5);
	assert_null(fg_gw_dispatch(gw, 6)); /* 44,000 + 12,000 > 50,000 */
	fg_gw_finish(gw, &g[1], &u, 7);
	assert_ptr_equal(fg_gw_dispatch(gw, 8), &g[3]);
	fg_gw_abort(gw, &g[2], 9);
	fg_gw_abort(gw, &g[3], 9);
	fg_gw_abort(gw, &big, 9);
	assert_int_equal(gw->kv.node_reserved, 0);
}

/* gw->moved lists the tenants whose books a request moved since the reader
 * cleared it — admitted, refused, settled, aborted, timed out, a count
 * billed — each once; nothing else marks a tenant, and a reload starts it
 * empty. (agent.fleet's tick visits these and the ones not yet quiet.) */
static void moved_marks_whose_books_moved(void **state)
{
	struct fixture *f = *state;
	struct fg_gateway *gw = &f->gw;
	static struct fg_gw_request a, b, c;
	struct fg_request_shape s = shape(4 * 20000, 100, 1);
	struct fg_gw_decision why;

	assert_int_equal(gw->moved.n, 0);
	assert_int_equal(fg_gw_admit(gw, &a, 1, "m", &s, 0).outcome, FG_GW_QUEUED);
	assert_int_equal(gw->moved.n, 1);
	assert_int_equal(gw->moved.ids[0], 1);
	assert_int_equal(fg_gw_admit(gw, &b, 1, "m", &s, 0).outcome, FG_GW_QUEUED);
	assert_int_equal(gw->moved.n, 1); /* once */
	fg_idset_clear(&gw->moved);
	/* dispatching, output and the tick move no books */
	assert_ptr_equal(fg_gw_dispatch(gw, 0), &a);
	fg_gw_output(gw, &a, 10, 1 * MS);
	fg_peak_tick(&gw->peaks, 2 * MS);
	assert_int_equal(gw->moved.n, 0);
	struct fg_usage u = { .prompt_tokens = 20000, .completion_tokens = 10 };
	fg_gw_finish(gw, &a, &u, 3 * MS);
	assert_true(fg_idset_has(&gw->moved, 1));
	assert_false(fg_idset_has(&gw->moved, 0));
	fg_idset_clear(&gw->moved);
	/* b waits past its tier's 30 s: timed out and refunded */
	assert_ptr_equal(fg_gw_expire(gw, 31 * NS, &why), &b);
	assert_true(fg_idset_has(&gw->moved, 1));
	fg_idset_clear(&gw->moved);
	fg_gw_tokenizer_ran(gw, 0, 100, 32 * NS, NULL);
	assert_true(fg_idset_has(&gw->moved, 0));
	fg_idset_clear(&gw->moved);
	/* refused for the rate marks it too: refused units are books the
	 * fleet reads (globex's bucket holds 60,000 units, these ~20,000) */
	static struct fg_gw_request more[8];
	enum fg_gw_outcome o = FG_GW_QUEUED;
	for (int k = 0; k < 8 && o == FG_GW_QUEUED; k++) {
		fg_idset_clear(&gw->moved);
		o = fg_gw_admit(gw, &more[k], 1, "m", &s, 33 * NS).outcome;
	}
	assert_int_equal(o, FG_GW_RETRY_LATER);
	assert_true(fg_idset_has(&gw->moved, 1));
	/* an unknown tenant marks nothing */
	fg_idset_clear(&gw->moved);
	assert_int_equal(fg_gw_admit(gw, &c, 7, "m", &s, 33 * NS).outcome, FG_GW_BUCKET_NEVER);
	assert_int_equal(gw->moved.n, 0);
	assert_int_equal(fg_gw_admit(gw, &c, 0, "m", &s, 34 * NS).outcome, FG_GW_QUEUED);
	fg_gw_abort(gw, &c, 35 * NS);
	assert_int_equal(gw->moved.n, 1);
	/* a reload: empty, sized to the new policy */
	assert_int_equal(fg_gw_reload(gw, &f->p, 36 * NS), 0);
	assert_int_equal(gw->moved.n, 0);
	assert_int_equal(gw->moved.slots, 2);
}

static void queue_timeout_refunds_and_says_so(void **state)
{
	struct fixture *f = *state;
	struct fg_gateway *gw = &f->gw;
	static struct fg_gw_request a, b;
	struct fg_request_shape s = shape(4 * 20000, 100, 1);
	assert_int_equal(fg_gw_admit(gw, &a, 1, "m", &s, 0).outcome, FG_GW_QUEUED);
	assert_ptr_equal(fg_gw_dispatch(gw, 0), &a); /* a holds the engine window */
	assert_int_equal(fg_gw_admit(gw, &b, 1, "m", &s, 1 * NS).outcome, FG_GW_QUEUED);
	assert_null(fg_gw_dispatch(gw, 1 * NS));
	assert_int_equal(fg_gw_next_deadline(gw), 31 * NS);
	struct fg_gw_decision why;
	assert_null(fg_gw_expire(gw, 30 * NS, &why));
	assert_ptr_equal(fg_gw_expire(gw, 31 * NS, &why), &b);
	assert_int_equal(why.outcome, FG_GW_TIMED_OUT);
	/* as long as it waited, spread by up to FG_RETRY_SPREAD */
	assert_true(why.wait_ns >= 30 * NS);
	assert_true(why.wait_ns <= (uint64_t)(30 * NS * (1 + FG_RETRY_SPREAD)));
	assert_non_null(strstr(why.reason, "not charged"));
	assert_int_equal(gw->t[1].timed_out, 1);
	assert_int_equal(gw->t[1].inflight, 1);
	fg_gw_abort(gw, &a, 32 * NS);
	assert_true(fabs(fg_bucket_level(&gw->t[1].bucket, 32 * NS) - 60000) < 1e-6);
}

static void reload_keeps_buckets_and_queues(void **state)
{
	struct fixture *f = *state;
	struct fg_gateway *gw = &f->gw;
	static struct fg_gw_request a, b, c;
	struct fg_request_shape s = shape(4000, 1000, 1);
	assert_int_equal(fg_gw_admit(gw, &a, 1, "m", &s, 0).outcome, FG_GW_QUEUED);
	assert_ptr_equal(fg_gw_dispatch(gw, 0), &a);
	assert_int_equal(fg_gw_admit(gw, &b, 1, "m", &s, 0).outcome, FG_GW_QUEUED);
	assert_int_equal(fg_gw_admit(gw, &c, 0, "m", &s, 0).outcome, FG_GW_QUEUED);
	double level = fg_bucket_level(&gw->t[1].bucket, 0);

	/* new policy: globex first, acme removed, initech added */
	struct fg_policy *np = calloc(1, sizeof(*np));
	fg_policy_defaults(np);
	add_tier(np, "standard", 1, 32768, 131072, 30);
	add_tenant(np, "initech", 0, 500);
	add_tenant(np, "globex", 0, 2000);
	fg_gw_reload(gw, np, 0);
	assert_int_equal(a.tenant, 1);
	assert_int_equal(b.tenant, 1);
	assert_true(c.orphan);
	assert_true(fabs(fg_bucket_level(&gw->t[1].bucket, 0) - level) < 1e-6);
	assert_true(gw->t[1].bucket.rate == 2000);
	assert_int_equal(gw->t[1].inflight, 2);
	assert_true(fabs(gw->t[0].bucket.level - 500 * 60) < 1e-6);
	/* acme's waiting request is handed back first */
	struct fg_gw_decision why;
	assert_ptr_equal(fg_gw_expire(gw, 0, &why), &c);
	assert_int_equal(why.outcome, FG_GW_TENANT_GONE);
	struct fg_usage u = { .prompt_tokens = 1000, .completion_tokens = 10 };
	fg_gw_finish(gw, &a, &u, 1);
	assert_ptr_equal(fg_gw_dispatch(gw, 1), &b);
	fg_gw_finish(gw, &b, &u, 2);
	assert_int_equal(gw->t[1].inflight, 0);
	assert_int_equal(gw->kv.node_reserved, 0);
	assert_null(gw->live);
	gw->policy = &f->p; /* np is freed; teardown does not touch gw */
	fg_policy_free(np);
}

/* The per-tenant state is sized to the policy and a reload resizes it: a
 * policy grown to 5,000 tenants, with the two that stay moved to the top
 * ids, then shrunk to those two again; each keeps its bucket, fair-queue
 * counters, KV books, peak, counters and queued requests through both. */
static void reload_resizes_keeping_state(void **state)
{
	struct fixture *f = *state;
	struct fg_gateway *gw = &f->gw;
	static struct fg_gw_request a, b, c;
	struct fg_request_shape s = shape(4000, 1000, 1);

	assert_int_equal(gw->n_tenants, 2);
	assert_int_equal(gw->fq.slots, 2);
	assert_int_equal(gw->kv.slots, 2);
	assert_int_equal(gw->peaks.slots, 2);
	/* acme: one sent and settled (billed, a peak), one sent and running
	 * (KV held, in service); globex: one queued */
	assert_int_equal(fg_gw_admit(gw, &a, 0, "m", &s, 0).outcome, FG_GW_QUEUED);
	assert_ptr_equal(fg_gw_dispatch(gw, 0), &a);
	struct fg_usage u = { .prompt_tokens = 1000, .completion_tokens = 10 };
	double billed = fg_gw_finish(gw, &a, &u, 1 * MS);
	assert_true(billed > 0);
	assert_int_equal(fg_gw_admit(gw, &b, 0, "m", &s, 2 * MS).outcome, FG_GW_QUEUED);
	assert_ptr_equal(fg_gw_dispatch(gw, 2 * MS), &b);
	assert_int_equal(fg_gw_admit(gw, &c, 1, "m", &s, 3 * MS).outcome, FG_GW_QUEUED);
	struct fg_gw_tenant acme = gw->t[0], globex = gw->t[1];
	struct fg_fq_tenant acme_fq = gw->fq.t[0];
	uint64_t acme_kv = gw->kv.reserved[0], node_kv = gw->kv.node_reserved;
	assert_true(acme_kv > 0);

	struct fg_policy *big = calloc(1, sizeof(*big));
	fg_policy_defaults(big);
	add_tier(big, "standard", 1, 32768, 131072, 30);
	add_tier(big, "premium", 2, 131072, 262144, 30);
	char name[32];
	for (uint32_t i = 0; i < 4998; i++) {
		snprintf(name, sizeof(name), "t%05u", i);
		add_tenant(big, name, 0, 100);
	}
	add_tenant(big, "globex", 0, 1000);
	add_tenant(big, "acme", 1, 9000);
	assert_int_equal(fg_gw_reload(gw, big, 4 * MS), 0);
	assert_int_equal(gw->n_tenants, 5000);
	assert_int_equal(gw->fq.slots, 5000);
	assert_int_equal(gw->kv.slots, 5000);
	assert_int_equal(gw->peaks.slots, 5000);
	const uint32_t A = 4999, G = 4998;
	assert_int_equal(b.tenant, A);
	assert_int_equal(c.tenant, G);
	assert_true(fabs(fg_bucket_level(&gw->t[A].bucket, 4 * MS) - fg_bucket_level(&acme.bucket, 4 * MS)) < 1e-6);
	assert_true(gw->t[A].billed_units == acme.billed_units);
	assert_int_equal(gw->t[A].admitted, 2);
	assert_int_equal(gw->t[A].inflight, 1);
	assert_int_equal(gw->t[G].inflight, globex.inflight);
	assert_true(gw->fq.t[A].vtc == acme_fq.vtc);
	assert_int_equal(gw->fq.t[A].in_service, 1);
	assert_true(gw->fq.t[A].active);
	assert_int_equal(gw->fq.t[G].queued, 1);
	assert_int_equal(gw->kv.reserved[A], acme_kv);
	assert_int_equal(gw->kv.node_reserved, node_kv);
	assert_int_equal(gw->kv.cap[A], 262144);
	assert_true(gw->t[7].admitted == 0 && gw->kv.reserved[7] == 0 && gw->fq.t[7].vtc == 0);
	/* the billed units are still in acme's open peak window, at its new id */
	fg_peak_tick(&gw->peaks, 61 * NS);
	assert_true(fabs(gw->peaks.peak[A] - billed / 60) < 1e-9);
	assert_true(gw->peaks.peak[0] == 0);
	assert_true(fabs(fg_peak_sum_tenants(&gw->peaks) - billed / 60) < 1e-9);
	/* the highest id is a tenant like any other */
	static struct fg_gw_request d, e;
	assert_int_equal(fg_gw_admit(gw, &d, 4999, "m", &s, 61 * NS).outcome, FG_GW_QUEUED);
	assert_int_equal(fg_gw_admit(gw, &e, 5000, "m", &s, 61 * NS).outcome, FG_GW_BUCKET_NEVER);

	/* prepared and cancelled: nothing moved */
	struct fg_gw_tenant_state next;
	assert_int_equal(fg_gw_reload_prepare(gw, &f->p, &next), 0);
	fg_gw_reload_cancel(&next);
	assert_int_equal(gw->n_tenants, 5000);
	assert_ptr_equal(gw->policy, big);

	/* back to the first policy: 2 slots again, the same two tenants */
	assert_int_equal(fg_gw_reload(gw, &f->p, 62 * NS), 0);
	assert_int_equal(gw->n_tenants, 2);
	assert_int_equal(gw->fq.slots, 2);
	assert_int_equal(b.tenant, 0);
	assert_int_equal(c.tenant, 1);
	assert_int_equal(d.tenant, 0);
	assert_int_equal(gw->t[0].inflight, 2);
	assert_int_equal(gw->kv.reserved[0], acme_kv);
	assert_true(fabs(gw->peaks.peak[0] - billed / 60) < 1e-9);
	assert_int_equal(gw->fq.t[1].queued, 1);
	/* the queues work as before: globex's and acme's requests go */
	struct fg_gw_request *next_r = fg_gw_dispatch(gw, 62 * NS);
	assert_true(next_r == &c || next_r == &d);
	fg_gw_finish(gw, &b, &u, 63 * NS);
	fg_gw_abort(gw, &c, 63 * NS);
	fg_gw_abort(gw, &d, 63 * NS);
	assert_int_equal(gw->kv.node_reserved, 0);
	assert_null(gw->live);
	fg_policy_free(big);
}

/* The fair queue is charged the prompt at dispatch and each streamed token
 * at the context it decoded against, as it arrives: the first token comes
 * with the prefill, the k-th costs t(prompt + k - 1). It ends charged
 * exactly what was billed. */
static void streamed_output_charged_by_context(void **state)
{
	struct fixture *f = *state;
	struct fg_gateway *gw = &f->gw;
	static struct fg_gw_request r;
	const struct fg_cost_model *cm = &gw->cm;
	struct fg_request_shape s = { .prompt_token_ids = 30000, .max_tokens = 100, .n = 1 };
	double served0 = gw->fq.t[0].served_units;

	assert_int_equal(fg_gw_admit(gw, &r, 0, "m", &s, 0).outcome, FG_GW_QUEUED);
	assert_ptr_equal(fg_gw_dispatch(gw, 1), &r);
	assert_true(fabs(gw->fq.t[0].served_units - served0 - 30000) < 1e-9);
	fg_gw_output(gw, &r, 1, 2);
	assert_true(fabs(gw->fq.t[0].served_units - served0 - 30000) < 1e-9);
	/* 54.843 us + 30,001 x 32.605 ns = 1,033.03 us = 28.977 units */
	fg_gw_output(gw, &r, 2, 3);
	assert_true(fabs(gw->fq.t[0].served_units - served0 - 30000 - 28.977) < 1e-3);
	fg_gw_output(gw, &r, 3, 4);
	assert_true(fabs(gw->fq.t[0].served_units - served0 - 30000 - 28.977 - 28.978) < 1e-3);
	/* 50 streamed: 49 steps from 30,001, t(30,025) = 28.9994 units */
	fg_gw_output(gw, &r, 50, 5);
	assert_true(fabs(gw->fq.t[0].served_units - served0 - 30000 - 49 * 28.9994) < 1e-2);
	/* an engine that streams past the reservation is charged up to it */
	fg_gw_output(gw, &r, 500, 6);
	assert_true(fabs(gw->fq.t[0].served_units - served0 - 30000 - fg_decode_units(cm, 30001, 99)) <
		    1e-9);
	struct fg_usage u = { .prompt_tokens = 30000, .completion_tokens = 80 };
	double billed = fg_gw_finish(gw, &r, &u, 7);
	assert_true(fabs(billed - 30000 - fg_decode_units(cm, 30001, 79)) < 1e-9);
	assert_true(fabs(gw->fq.t[0].served_units - served0 - billed) < 1e-6);
	/* the tenant's output books: 80 tokens at ~29.0 units each */
	assert_true(fabs(gw->t[0].billed_output_tokens - 80) < 1e-9);
	assert_true(fabs(gw->t[0].billed_output_units - fg_decode_units(cm, 30001, 79)) < 1e-6);
	assert_true(fabs(gw->t[0].billed_output_units / 80 - 28.65) < 0.01);
}

/* agent.output_pricing: flat prices every output token at the reference
 * weight (the seed's 3.09), through reloads too. */
static void flat_output_pricing_from_the_policy(void **state)
{
	struct fixture *f = *state;
	struct fg_gateway *gw = &f->gw;
	static struct fg_gw_request r;
	struct fg_request_shape s = shape(8000, 500, 1);

	f->p.agent.output_pricing = FG_OUTPUT_FLAT;
	fg_gw_reload(gw, &f->p, 0);
	struct fg_gw_decision d = fg_gw_admit(gw, &r, 0, "m", &s, 0);
	assert_int_equal(d.outcome, FG_GW_QUEUED);
	assert_true(fabs(d.cost - (2000 + 500 * gw->cm.output_weight)) < 1e-6);
	assert_true(fabs(d.cost - 3546.6) < 0.1);
	assert_ptr_equal(fg_gw_dispatch(gw, 1), &r);
	fg_gw_output(gw, &r, 1, 2);
	assert_true(fabs(gw->fq.t[0].served_units - 2000 - gw->cm.output_weight) < 1e-9);
	struct fg_usage u = { .prompt_tokens = 2000, .completion_tokens = 100 };
	assert_true(fabs(fg_gw_finish(gw, &r, &u, 3) - (2000 + 100 * gw->cm.output_weight)) < 1e-6);

	f->p.agent.output_pricing = FG_OUTPUT_CONTEXT;
	fg_gw_reload(gw, &f->p, 4);
	d = fg_gw_admit(gw, &r, 0, "m", &s, 4);
	assert_true(fabs(d.cost - 3794.533) < 1e-3);
	fg_gw_abort(gw, &r, 5);
}

static void overload_sheds_lowest_tiers_first(void **state)
{
	struct fixture *f = *state;
	struct fg_gateway *gw = &f->gw;
	int ranks[FG_MAX_TIERS];

	/* standard (weight 1) ranks below premium (weight 2) */
	fg_tier_ranks(&f->p, ranks);
	assert_int_equal(ranks[0], 0);
	assert_int_equal(ranks[1], 1);
	/* standard waits at most 30 s: a longer backlog sheds it */
	assert_int_equal(fg_overload_level(&f->p, 10, -1), -1);
	assert_int_equal(fg_overload_level(&f->p, 31, -1), 0);
	/* hysteresis: stays until the backlog halves */
	assert_int_equal(fg_overload_level(&f->p, 20, 0), 0);
	assert_int_equal(fg_overload_level(&f->p, 14, 0), -1);
	/* the top tier is never shed by the node, however long the backlog */
	assert_int_equal(fg_overload_level(&f->p, 1e6, -1), 0);
	/* three tiers: the middle one goes once the backlog passes its limit */
	add_tier(&f->p, "bulk", 0.5, 32768, 131072, 10);
	fg_tier_ranks(&f->p, ranks);
	assert_int_equal(ranks[2], 0);
	assert_int_equal(ranks[0], 1);
	assert_int_equal(fg_overload_level(&f->p, 11, -1), 0);
	assert_int_equal(fg_overload_level(&f->p, 31, -1), 1);
	assert_int_equal(fg_overload_level(&f->p, 1e6, -1), 1);

	/* the backlog is the queued reservations at the replica's full speed */
	static struct fg_gw_request a, b;
	struct fg_request_shape s = shape(4 * 8000, 100, 1);
	assert_true(fg_gw_backlog_s(gw) == 0);
	assert_int_equal(fg_gw_admit(gw, &a, 0, "m", &s, 0).outcome, FG_GW_QUEUED);
	assert_int_equal(fg_gw_admit(gw, &b, 0, "m", &s, 0).outcome, FG_GW_QUEUED);
	double full_speed = gw->cm.replica_units_per_s / f->p.replica.ceiling;
	assert_true(fabs(fg_gw_backlog_s(gw) - 2 * a.price.units / full_speed) < 1e-9);
	assert_ptr_equal(fg_gw_dispatch(gw, 0), &a);
	assert_true(fabs(fg_gw_backlog_s(gw) - b.price.units / full_speed) < 1e-9);
	fg_gw_abort(gw, &a, 0);
	fg_gw_abort(gw, &b, 0);
}

/* One tenant feeds text that tokenizes at 16 chars/token (as repeated
 * characters do) for a long time, then sends a prompt of dense text: the
 * other tenant's estimates, caps and prices do not move at all, and the
 * poisoner's own ratio stays within twice the prior. */
static void no_tenant_moves_another_s_estimate(void **state)
{
	struct fixture *f = *state;
	struct fg_gateway *gw = &f->gw;
	struct fg_gw_request a, b_before, b_after;
	struct fg_request_shape s = shape(4 * 20000, 500, 1);

	assert_int_equal(fg_gw_admit(gw, &b_before, 1, "m", &s, 0).outcome, FG_GW_QUEUED);
	fg_gw_abort(gw, &b_before, 0);
	for (int i = 0; i < 500; i++) {
		struct fg_request_shape p = shape(16000, 10, 1);
		assert_int_equal(fg_gw_admit(gw, &a, 0, "m", &p, 0).outcome, FG_GW_QUEUED);
		fg_gw_learn(gw, &a, "m", 1000); /* the engine counted 1,000 tokens */
		fg_gw_abort(gw, &a, 0);
	}
	double poisoned = fg_gw_chars_per_token(gw, 0, "m");
	assert_true(fabs(poisoned - 4.0 * FG_CPT_OVER_PRIOR) < 1e-3);
	assert_true(fabs(fg_gw_chars_per_token(gw, 1, "m") - 4.0) < 1e-9);
	assert_int_equal(fg_gw_admit(gw, &b_after, 1, "m", &s, 0).outcome, FG_GW_QUEUED);
	assert_true(b_after.price.units == b_before.price.units);
	assert_true(b_after.kv_tokens == b_before.kv_tokens);
	assert_true(b_after.context_tokens == b_before.context_tokens);
	fg_gw_abort(gw, &b_after, 0);
	/* the poisoner's own limits are still judged at the prior's count:
	 * 160,000 chars are 20,000 tokens at its ratio of 8 but 40,000 at the
	 * prior's 4, above the 32K long-context threshold (no pool here) */
	struct fg_request_shape dense = shape(4 * 40000, 100, 1);
	struct fg_gw_decision d = fg_gw_admit(gw, &a, 0, "m", &dense, 0);
	assert_int_equal(d.outcome, FG_GW_NO_LONG_POOL);
	/* its reservation is cheaper (its own ratio) but not below half */
	struct fg_gw_request cheap;
	struct fg_request_shape p = shape(16000, 10, 1);
	assert_int_equal(fg_gw_admit(gw, &cheap, 0, "m", &p, 0).outcome, FG_GW_QUEUED);
	assert_true(fabs(cheap.price.prompt_tokens - 16000 / poisoned) < 1);
	assert_true(cheap.kv_tokens >= 4000 + 10); /* KV at the prior's count */
	fg_gw_abort(gw, &cheap, 0);
	/* and a dense prompt's true count settles at what the engine says */
	struct fg_request_shape mid = shape(4 * 5000, 10, 1);
	assert_int_equal(fg_gw_admit(gw, &a, 0, "m", &mid, 0).outcome, FG_GW_QUEUED);
	assert_ptr_equal(fg_gw_dispatch(gw, 1), &a);
	struct fg_usage u = { .prompt_tokens = 20000, .completion_tokens = 10 };
	double billed = fg_gw_finish(gw, &a, &u, 2);
	assert_true(fabs(billed - (20000 + fg_output_units(&gw->cm, 20000, 10, 1))) < 1e-6);
}

static void exact_counts_are_asked_near_limits_only(void **state)
{
	struct fixture *f = *state;
	struct fg_gateway *gw = &f->gw;
	/* globex: standard tier, max_context 32768 */
	struct fg_request_shape small = shape(4000, 256, 1);
	struct fg_request_shape mid = shape(4 * 12000, 256, 1);  /* ~12K tokens, bytes say 48K */
	struct fg_request_shape near = shape(4 * 30000, 256, 1); /* ~30K: near 32K */
	struct fg_request_shape many = shape(4 * 30000, 256, 1);

	assert_false(fg_gw_exact_wanted(gw, 1, "m", &small, false, 0));
	assert_false(fg_gw_exact_wanted(gw, 1, "m", &small, true, 0));
	/* a non-stream whose bytes could make more than the limit: asked */
	assert_true(fg_gw_exact_wanted(gw, 1, "m", &mid, false, 0));
	/* a stream far from it goes: its first chunk tells */
	assert_false(fg_gw_exact_wanted(gw, 1, "m", &mid, true, 0));
	assert_true(fg_gw_exact_wanted(gw, 1, "m", &near, true, 0));
	/* what one call cannot count, or is exact already */
	many.prompts = 2;
	assert_false(fg_gw_exact_wanted(gw, 1, "m", &many, false, 0));
	near.exact_prompt_tokens = 30000;
	assert_false(fg_gw_exact_wanted(gw, 1, "m", &near, false, 0));
	struct fg_request_shape ids = { .prompt_token_ids = 31000, .n = 1, .max_tokens = 256 };
	assert_false(fg_gw_exact_wanted(gw, 1, "m", &ids, false, 0));
	/* the exact count decides: 30,000 + 256 fits, 32,600 + 256 does not */
	struct fg_gw_request r;
	assert_int_equal(fg_gw_admit(gw, &r, 1, "m", &near, 0).outcome, FG_GW_QUEUED);
	assert_true(r.prompt_exact);
	assert_int_equal(gw->t[1].exact_counts, 1);
	fg_gw_abort(gw, &r, 0);
	near.exact_prompt_tokens = 32600;
	assert_int_equal(fg_gw_admit(gw, &r, 1, "m", &near, 0).outcome, FG_GW_CONTEXT_EXCEEDED);
	/* the engine's own max_model_len, once /tokenize told it */
	gw->engine_max_model_len = 8192;
	struct fg_request_shape nine = shape(4 * 9000, 10, 1);
	nine.exact_prompt_tokens = 9000;
	struct fg_gw_decision d = fg_gw_admit(gw, &r, 0, "m", &nine, 0);
	assert_int_equal(d.outcome, FG_GW_CONTEXT_EXCEEDED);
	assert_non_null(strstr(d.reason, "engine's maximum context length of 8192"));
	/* no cap named: the output reservation is what the context leaves */
	struct fg_request_shape nocap = shape(4 * 8000, 0, 1);
	nocap.exact_prompt_tokens = 8000;
	assert_int_equal(fg_gw_admit(gw, &r, 0, "m", &nocap, 0).outcome, FG_GW_QUEUED);
	assert_int_equal(r.price.per_choice, 192);
	fg_gw_abort(gw, &r, 0);
}

/* A stream's first chunk tells the true prompt: over max_context or the KV
 * cap it is ended; otherwise its KV reservation follows the count. */
static void the_true_prompt_is_checked_again(void **state)
{
	struct fixture *f = *state;
	struct fg_gateway *gw = &f->gw;
	struct fg_gw_request r;
	struct fg_request_shape s = shape(4 * 1000, 100, 2); /* ~1,000 tokens, 2 choices */

	assert_int_equal(fg_gw_admit(gw, &r, 1, "m", &s, 0).outcome, FG_GW_QUEUED);
	assert_ptr_equal(fg_gw_dispatch(gw, 1), &r);
	uint64_t held = gw->kv.reserved[1];
	/* fewer tokens than thought: the reservation shrinks */
	struct fg_gw_decision d = fg_gw_prompt_known(gw, &r, 800, 2);
	assert_int_equal(d.outcome, FG_GW_QUEUED);
	assert_int_equal(gw->kv.reserved[1], 2 * (800 + 100));
	assert_true(gw->kv.reserved[1] < held);
	/* more, still within the limits: it grows */
	d = fg_gw_prompt_known(gw, &r, 3000, 3);
	assert_int_equal(d.outcome, FG_GW_QUEUED);
	assert_int_equal(gw->kv.reserved[1], 2 * (3000 + 100));
	/* beyond max_context (32,768): ended, billed what it used */
	d = fg_gw_prompt_known(gw, &r, 40000, 4);
	assert_int_equal(d.outcome, FG_GW_CONTEXT_EXCEEDED);
	assert_non_null(strstr(d.reason, "as the engine counts it"));
	assert_int_equal(gw->t[1].cut_off, 1);
	struct fg_usage u = { .prompt_tokens = 40000 };
	double billed = fg_gw_finish(gw, &r, &u, 5);
	assert_true(billed > 0);
	assert_int_equal(gw->kv.reserved[1], 0);
	/* within max_context but n x (prompt + out) above the tenant's KV cap */
	struct fg_request_shape w = shape(4 * 1000, 1000, 8);
	assert_int_equal(fg_gw_admit(gw, &r, 1, "m", &w, 10).outcome, FG_GW_QUEUED);
	assert_ptr_equal(fg_gw_dispatch(gw, 11), &r);
	d = fg_gw_prompt_known(gw, &r, 20000, 12); /* 8 x 21,000 = 168,000 > 131,072 */
	assert_int_equal(d.outcome, FG_GW_KV_NEVER);
	assert_non_null(strstr(d.reason, "per-tenant KV cap"));
	fg_gw_finish(gw, &r, &(struct fg_usage){ .prompt_tokens = 20000 }, 13);
	assert_int_equal(gw->kv.reserved[1], 0);
	assert_int_equal(gw->kv.node_reserved, 0);
	assert_null(gw->live);
}

/* The engine's /tokenize count of a request admission refused is billed:
 * a tenant whose near-limit prompts are all refused still pays for the
 * counting, as its own /tokenize would; at the prefix-cache
 * price of the prompt, from the bucket (into debt if need be), and in the
 * billed total, not in the fair queue. */
static void an_exact_count_is_billed_like_tokenize(void **state)
{
	struct fixture *f = *state;
	struct fg_gateway *gw = &f->gw;
	uint64_t now = 5 * NS;
	const double w = gw->cm.cached_prompt_weight;
	double level0 = fg_bucket_level(&gw->t[1].bucket, now);
	double vtc0 = gw->fq.t[1].vtc;

	double units = fg_gw_tokenizer_ran(gw, 1, 40000, now, NULL);
	assert_true(units > 0);
	/* one definition: the price of the tenant's own /tokenize of as many tokens */
	struct fg_prompt_est est = { .tokens = 40000, .tokens_max = 40000 };
	struct fg_request_shape tok = { .no_gpu = true };
	struct fg_price p = fg_price_request(&gw->cm, f->p.agent.metering, &est, &tok, 0, 0);
	assert_true(fabs(units - p.units) < 1e-9);
	/* and cheaper than running the prompt: the prefix-cache weight of it */
	struct fg_request_shape run = { .prompt_only = true };
	struct fg_price full = fg_price_request(&gw->cm, f->p.agent.metering, &est, &run, 0, 0);
	assert_true(fabs(units - w * full.units) < 1e-6 * full.units);
	assert_true(fabs(fg_bucket_level(&gw->t[1].bucket, now) - (level0 - units)) < 1e-6);
	assert_true(fabs(gw->t[1].billed_units - units) < 1e-9);
	assert_true(gw->fq.t[1].vtc == vtc0);
	/* globex's bucket (1000/s, 60 s) emptied by counts alone goes into debt */
	for (int i = 0; i < 40; i++)
		fg_gw_tokenizer_ran(gw, 1, 40000, now, NULL);
	assert_true(fg_bucket_level(&gw->t[1].bucket, now) < 0);
	/* no tenant, no charge */
	assert_true(fg_gw_tokenizer_ran(gw, 99, 40000, now, NULL) == 0);
}

/* A rate refusal after an exact count: the count's price leaves the
 * bucket after admission decided, so the wait admission stated would be
 * short by its refill; the wait, and the tenant's retry turn, move by it,
 * and at the stated moment the bucket holds the refused price again. */
static void a_count_refused_on_rate_tells_a_true_wait(void **state)
{
	struct fixture *f = *state;
	struct fg_gateway *gw = &f->gw;
	static struct fg_gw_request rs[64];
	struct fg_request_shape s = shape(4000, 1000, 1);
	uint64_t now = 0;
	int admitted = 0;
	struct fg_gw_decision d;

	/* globex: 60000-unit burst, 1000 units/s */
	while ((d = fg_gw_admit(gw, &rs[admitted], 1, "m", &s, now)).outcome == FG_GW_QUEUED)
		admitted++;
	assert_int_equal(d.outcome, FG_GW_RETRY_LATER);
	uint64_t stated = d.wait_ns, turn = gw->t[1].retry_turn_ns;
	double units = fg_gw_tokenizer_ran(gw, 1, 40000, now, &d);
	assert_true(units > 0);
	double later = units / 1000 * 1e9;
	assert_true(fabs((double)(d.wait_ns - stated) - later) <= 1);
	assert_true(fabs((double)(gw->t[1].retry_turn_ns - turn) - later) <= 1);
	/* what was stated before the count: too early now */
	assert_true(fg_bucket_level(&gw->t[1].bucket, now + stated) < d.cost - 1);
	/* what is stated now: the refused price fits (the spread only adds) */
	assert_true(fg_bucket_level(&gw->t[1].bucket, now + d.wait_ns) >= d.cost - 1e-6);
	/* a refusal of another kind, or none, keeps its decision */
	struct fg_gw_decision other = { .outcome = FG_GW_CONTEXT_EXCEEDED, .wait_ns = 7 };
	fg_gw_tokenizer_ran(gw, 1, 40000, now, &other);
	assert_int_equal(other.wait_ns, 7);
	for (int i = 0; i < admitted; i++)
		fg_gw_abort(gw, &rs[i], now);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(admit_price_and_settle_refund, setup, teardown),
		cmocka_unit_test_setup_teardown(moved_marks_whose_books_moved, setup, teardown),
		cmocka_unit_test_setup_teardown(no_tenant_moves_another_s_estimate, setup, teardown),
		cmocka_unit_test_setup_teardown(exact_counts_are_asked_near_limits_only, setup, teardown),
		cmocka_unit_test_setup_teardown(an_exact_count_is_billed_like_tokenize, setup, teardown),
		cmocka_unit_test_setup_teardown(a_count_refused_on_rate_tells_a_true_wait, setup, teardown),
		cmocka_unit_test_setup_teardown(the_true_prompt_is_checked_again, setup, teardown),
		cmocka_unit_test_setup_teardown(refusals_say_why, setup, teardown),
		cmocka_unit_test_setup_teardown(retry_after_from_refill, setup, teardown),
		cmocka_unit_test_setup_teardown(kv_cap_makes_tenant_wait_not_others, setup, teardown),
		cmocka_unit_test_setup_teardown(large_prompt_goes_in_its_turn, setup, teardown),
		cmocka_unit_test_setup_teardown(refused_request_costs_its_turn, setup, teardown),
		cmocka_unit_test_setup_teardown(node_kv_wait_holds_the_others, setup, teardown),
		cmocka_unit_test_setup_teardown(queue_timeout_refunds_and_says_so, setup, teardown),
		cmocka_unit_test_setup_teardown(reload_keeps_buckets_and_queues, setup, teardown),
		cmocka_unit_test_setup_teardown(reload_resizes_keeping_state, setup, teardown),
		cmocka_unit_test_setup_teardown(overload_sheds_lowest_tiers_first, setup, teardown),
		cmocka_unit_test_setup_teardown(streamed_output_charged_by_context, setup, teardown),
		cmocka_unit_test_setup_teardown(flat_output_pricing_from_the_policy, setup, teardown),
	};
	return cmocka_run_group_tests_name("gateway", tests, NULL, NULL);
}
