/* test_fair_queue.c — VTC scheduling, KV ledger, engine window, peak meter:
 * the pure pieces of issue 6 driven by an explicit clock. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "policy/engine_window.h"
#include "policy/fair_queue.h"
#include "policy/kv_ledger.h"
#include "policy/peak_meter.h"

#define NS 1000000000ull

static struct fg_fq *new_fq(uint32_t n)
{
	struct fg_fq *fq = test_malloc(sizeof(*fq));
	assert_int_equal(fg_fq_init(fq, n), 0);
	return fq;
}

/* Serve a backlogged system one item at a time: each item costs `cost[t]`
 * units at dispatch; returns served units per tenant after `rounds`. */
static void run_backlogged(struct fg_fq *fq, uint32_t n, const double *cost, int rounds,
			   double *served)
{
	struct fg_fq_item *items = test_calloc((size_t)n * 4, sizeof(*items));
	for (uint32_t t = 0; t < n; t++)
		for (int k = 0; k < 4; k++) {
			struct fg_fq_item *it = &items[t * 4 + k];
			it->tenant = t;
			it->dispatch_units = cost[t];
			fg_fq_push(fq, it);
		}
	for (int r = 0; r < rounds; r++) {
		struct fg_fq_item *it = fg_fq_pop(fq, NULL, NULL);
		assert_non_null(it);
		served[it->tenant] += it->dispatch_units;
		fg_fq_done(fq, it->tenant);
		fg_fq_push(fq, it); /* stays backlogged */
	}
	for (uint32_t t = 0; t < n; t++)
		while (fq->t[t].head)
			fg_fq_remove(fq, fq->t[t].head);
	test_free(items);
}

static void weighted_shares_follow_weights(void **state)
{
	(void)state;
	struct fg_fq *fq = new_fq(3);
	fg_fq_set_weight(fq, 0, 1);
	fg_fq_set_weight(fq, 1, 2);
	fg_fq_set_weight(fq, 2, 1);
	/* different request sizes must not change the shares: fairness is in
	 * units, not requests */
	double cost[3] = { 100, 100, 1000 }, served[3] = { 0 };
	run_backlogged(fq, 3, cost, 20000, served);
	double total = served[0] + served[1] + served[2];
	assert_true(fabs(served[0] / total - 0.25) < 0.01);
	assert_true(fabs(served[1] / total - 0.50) < 0.01);
	assert_true(fabs(served[2] / total - 0.25) < 0.01);
	fg_fq_free(fq);
	test_free(fq);
}

static void returning_tenant_gets_no_credit_for_idle_time(void **state)
{
	(void)state;
	struct fg_fq *fq = new_fq(2);
	struct fg_fq_item a[64], b[4];
	memset(a, 0, sizeof(a));
	memset(b, 0, sizeof(b));
	/* A works alone for a long time */
	for (int i = 0; i < 64; i++) {
		a[i].tenant = 0;
		a[i].dispatch_units = 100;
		fg_fq_push(fq, &a[i]);
	}
	for (int i = 0; i < 32; i++) {
		struct fg_fq_item *it = fg_fq_pop(fq, NULL, NULL);
		assert_ptr_equal(it, &a[i]);
		fg_fq_done(fq, 0);
	}
	/* B arrives: lifted to A's counter, so it alternates with A instead of
	 * monopolising the queue for 32 items */
	for (int i = 0; i < 4; i++) {
		b[i].tenant = 1;
		b[i].dispatch_units = 100;
		fg_fq_push(fq, &b[i]);
	}
	assert_true(fq->t[1].vtc >= fq->t[0].vtc);
	int b_in_first_four = 0;
	for (int i = 0; i < 4; i++) {
		struct fg_fq_item *it = fg_fq_pop(fq, NULL, NULL);
		b_in_first_four += it->tenant == 1;
		fg_fq_done(fq, it->tenant);
	}
	assert_int_equal(b_in_first_four, 2);
	while (fq->t[0].head)
		fg_fq_remove(fq, fq->t[0].head);
	while (fq->t[1].head)
		fg_fq_remove(fq, fq->t[1].head);
	fg_fq_free(fq);
	test_free(fq);
}

static enum fg_fq_verdict block_tenant0(const struct fg_fq_item *it, void *ctx)
{
	(void)ctx;
	return it->tenant != 0 ? FG_FQ_GO : FG_FQ_SKIP;
}

static enum fg_fq_verdict tenant0_holds(const struct fg_fq_item *it, void *ctx)
{
	(void)ctx;
	return it->tenant != 0 ? FG_FQ_GO : FG_FQ_HOLD;
}

static void blocked_head_does_not_stall_others(void **state)
{
	(void)state;
	struct fg_fq *fq = new_fq(2);
	struct fg_fq_item a = { .tenant = 0, .dispatch_units = 1 };
	struct fg_fq_item b = { .tenant = 1, .dispatch_units = 1000 };
	fg_fq_push(fq, &a);
	fg_fq_push(fq, &b);
	/* A has the smaller counter but cannot go (KV cap): B goes */
	assert_ptr_equal(fg_fq_pop(fq, block_tenant0, NULL), &b);
	assert_null(fg_fq_pop(fq, block_tenant0, NULL));
	assert_ptr_equal(fg_fq_pop(fq, NULL, NULL), &a);
	assert_int_equal(fg_fq_total_queued(fq), 0);
	fg_fq_free(fq);
	test_free(fq);
}

static void head_waiting_for_a_shared_resource_holds_others(void **state)
{
	(void)state;
	struct fg_fq *fq = new_fq(2);
	struct fg_fq_item a = { .tenant = 0, .dispatch_units = 1 };
	struct fg_fq_item b = { .tenant = 1, .dispatch_units = 1000 };
	fg_fq_push(fq, &a);
	fg_fq_push(fq, &b);
	/* A is next and waits for the node's pool: B must not take it first */
	assert_null(fg_fq_pop(fq, tenant0_holds, NULL));
	assert_int_equal(fg_fq_total_queued(fq), 2);
	assert_ptr_equal(fg_fq_pop(fq, NULL, NULL), &a);
	/* A's counter is now past B's: B is next and goes */
	assert_ptr_equal(fg_fq_pop(fq, tenant0_holds, NULL), &b);
	fg_fq_free(fq);
	test_free(fq);
}

static void expire_and_remove(void **state)
{
	(void)state;
	struct fg_fq *fq = new_fq(2);
	struct fg_fq_item a = { .tenant = 0, .dispatch_units = 1, .deadline_ns = 5 * NS };
	struct fg_fq_item b = { .tenant = 1, .dispatch_units = 1, .deadline_ns = 9 * NS };
	struct fg_fq_item c = { .tenant = 1, .dispatch_units = 1, .deadline_ns = 0 };
	fg_fq_push(fq, &a);
	fg_fq_push(fq, &b);
	fg_fq_push(fq, &c);
	assert_null(fg_fq_expire(fq, 4 * NS));
	assert_ptr_equal(fg_fq_expire(fq, 5 * NS), &a);
	assert_null(fg_fq_expire(fq, 5 * NS));
	assert_ptr_equal(fg_fq_expire(fq, 10 * NS), &b);
	assert_null(fg_fq_expire(fq, 100 * NS)); /* c has no deadline */
	assert_true(fg_fq_remove(fq, &c));
	assert_false(fg_fq_remove(fq, &c));
	assert_int_equal(fg_fq_total_queued(fq), 0);
	assert_false(fq->t[0].active);
	assert_false(fq->t[1].active);
	/* charging output moves the counter by units / weight */
	fg_fq_set_weight(fq, 1, 4);
	double before = fq->t[1].vtc;
	fg_fq_charge(fq, 1, 400);
	assert_true(fabs(fq->t[1].vtc - before - 100) < 1e-9);
	fg_fq_free(fq);
	test_free(fq);
}

static void kv_caps(void **state)
{
	(void)state;
	struct fg_kv_ledger *l = test_malloc(sizeof(*l));
	assert_int_equal(fg_kv_init(l, 646503, 0.95, 2), 0);
	assert_int_equal(l->node_cap, 614177);
	fg_kv_set_cap(l, 0, 131072);
	/* n x (prompt + output) */
	assert_int_equal(fg_kv_tokens(1000, 500, 2), 3000);
	assert_int_equal(fg_kv_tokens(1000, 500, 0), 1500);
	assert_int_equal(fg_kv_check(l, 0, 131073), FG_KV_NEVER_TENANT);
	assert_int_equal(fg_kv_reserve(l, 0, 100000), FG_KV_OK);
	assert_int_equal(fg_kv_reserve(l, 0, 40000), FG_KV_WAIT);
	assert_int_equal(l->reserved[0], 100000);
	/* tenant 1 has no cap but the node does */
	assert_int_equal(fg_kv_check(l, 1, 700000), FG_KV_NEVER_NODE);
	assert_int_equal(fg_kv_reserve(l, 1, 514177), FG_KV_OK);
	assert_int_equal(fg_kv_reserve(l, 1, 1), FG_KV_WAIT_NODE);
	fg_kv_release(l, 0, 100000);
	assert_int_equal(fg_kv_reserve(l, 1, 1), FG_KV_OK);
	/* a double release clamps instead of wrapping */
	fg_kv_release(l, 0, 100000);
	assert_int_equal(l->reserved[0], 0);
	assert_int_equal(fg_kv_reserve(l, 0, 100000), FG_KV_WAIT_NODE); /* node full: 514178 + 100000 > 614177 */
	assert_int_equal(fg_kv_reserve(l, 0, 99999), FG_KV_OK);
	assert_int_equal(l->node_reserved, 614177);
	fg_kv_free(l);
	test_free(l);
}

static void engine_window_lets_any_size_go_in_turn(void **state)
{
	(void)state;
	struct fg_engine_window w;
	struct fg_ew_item it[10] = { 0 };
	fg_ew_init(&w, 2, 8192);
	assert_int_equal(fg_ew_waiting_limit(&w), 8);
	/* a prompt bigger than the whole window goes while others are pending:
	 * the window looks at what is pending, not at the next one's size */
	assert_true(fg_ew_may_dispatch(&w));
	fg_ew_sent(&w, &it[0], 300, true, 1);
	assert_true(fg_ew_may_dispatch(&w));
	fg_ew_sent(&w, &it[1], 50000, true, 2);
	assert_false(fg_ew_may_dispatch(&w));
	fg_ew_started(&w, &it[1]);
	fg_ew_started(&w, &it[1]); /* idempotent */
	assert_int_equal(w.pending_tokens, 300);
	assert_true(fg_ew_may_dispatch(&w));
	/* short prompts stop at the request limit well under the token budget */
	for (int i = 2; i < 9; i++) {
		assert_true(fg_ew_may_dispatch(&w));
		fg_ew_sent(&w, &it[i], 10, true, 3);
	}
	assert_int_equal(w.pending_requests, 8);
	assert_false(fg_ew_may_dispatch(&w));
	for (int i = 0; i < 9; i++)
		fg_ew_ended(&w, &it[i]);
	fg_ew_ended(&w, &it[0]); /* idempotent */
	assert_int_equal(w.pending_tokens, 0);
	assert_int_equal(w.pending_requests, 0);
	assert_int_equal(w.inflight, 0);
	assert_null(w.oldest);
	assert_null(w.newest);
}

static void engine_counts_start_non_streamed_requests(void **state)
{
	(void)state;
	struct fg_engine_window w;
	struct fg_ew_item a = { 0 }, b = { 0 }, c = { 0 }, d = { 0 }, e = { 0 };
	fg_ew_init(&w, 2, 396);
	fg_ew_sent(&w, &a, 100, false, 1);
	fg_ew_sent(&w, &b, 100, true, 2); /* a stream */
	fg_ew_sent(&w, &c, 100, false, 3);
	fg_ew_sent(&w, &d, 100, false, 4);
	assert_int_equal(fg_ew_unconfirmed(&w), 3);
	/* the engine has all four, two waiting: in arrival order a and b run;
	 * a is started, b waits for its own first token */
	assert_int_equal(fg_ew_engine_counts(&w, 2, 2, 10), 1);
	assert_true(a.started);
	assert_false(b.started);
	assert_false(c.started);
	assert_int_equal(w.pending_requests, 3);
	assert_int_equal(w.engine_extra, 0);
	/* e was sent after the engine was asked: it cannot be in these counts */
	fg_ew_sent(&w, &e, 100, false, 20);
	assert_int_equal(fg_ew_engine_counts(&w, 5, 0, 15), 2);
	assert_true(c.started && d.started);
	assert_false(e.started);
	/* the engine counts fewer than were sent (one still on its way, or an
	 * answer in flight): the newest are taken as not there yet */
	fg_ew_ended(&w, &a);
	assert_int_equal(fg_ew_engine_counts(&w, 2, 1, 30), 0);
	assert_false(e.started);
	assert_int_equal(fg_ew_engine_counts(&w, 4, 0, 30), 1);
	assert_true(e.started);
	fg_ew_ended(&w, &b);
	fg_ew_ended(&w, &c);
	fg_ew_ended(&w, &d);
	fg_ew_ended(&w, &e);
	assert_int_equal(w.started_by_engine, 4);
	assert_int_equal(w.pending_requests, 0);
}

static void engine_waiting_holds_even_with_nothing_pending(void **state)
{
	(void)state;
	struct fg_engine_window w;
	struct fg_ew_item a = { 0 };
	fg_ew_init(&w, 2, 396);
	/* another client's (or preempted) requests wait in the engine: nothing
	 * of ours is pending, and still nothing more may go */
	fg_ew_engine_counts(&w, 100, 12, 5);
	assert_int_equal(w.engine_extra, 12);
	assert_false(fg_ew_may_dispatch(&w));
	fg_ew_engine_counts(&w, 100, 7, 6);
	assert_true(fg_ew_may_dispatch(&w));
	fg_ew_sent(&w, &a, 10, false, 7);
	assert_false(fg_ew_may_dispatch(&w)); /* 1 pending + 7 waiting = 8 */
	/* the engine says 8 waiting: ours is one of them, 7 are not */
	assert_int_equal(fg_ew_engine_counts(&w, 100, 8, 8), 0);
	assert_int_equal(w.engine_extra, 7);
	/* our one ran and the queue drained */
	assert_int_equal(fg_ew_engine_counts(&w, 101, 0, 9), 1);
	assert_int_equal(w.engine_extra, 0);
	assert_true(fg_ew_may_dispatch(&w));
	/* counts gone stale: only our own books hold */
	fg_ew_engine_counts(&w, 100, 50, 10);
	assert_false(fg_ew_may_dispatch(&w));
	fg_ew_engine_unknown(&w);
	assert_true(fg_ew_may_dispatch(&w));
	fg_ew_ended(&w, &a);
}

static void peaks_and_oversubscription(void **state)
{
	(void)state;
	struct fg_peak_meter *m = test_malloc(sizeof(*m));
	assert_int_equal(fg_peak_init(m, 2, 60 * NS, 0), 0);
	/* minute 0: A at 100 units/s, B idle; minute 1: B at 100/s, A idle */
	fg_peak_add(m, 0, 6000, 10 * NS);
	fg_peak_add(m, 1, 6000, 70 * NS);
	fg_peak_tick(m, 120 * NS);
	assert_true(fabs(m->peak[0] - 100) < 1e-9);
	assert_true(fabs(m->peak[1] - 100) < 1e-9);
	assert_true(fabs(m->peak_node - 100) < 1e-9);
	/* they never peaked together: 200 sold on a 100 peak */
	assert_true(fabs(fg_peak_oversubscription(m) - 2.0) < 1e-9);
	/* minute 2 both at once: the ratio falls to 1 */
	fg_peak_add(m, 0, 6000, 130 * NS);
	fg_peak_add(m, 1, 6000, 131 * NS);
	/* a long idle gap closes the window and skips the empty ones */
	fg_peak_tick(m, 3600 * NS);
	assert_true(fabs(fg_peak_oversubscription(m) - 1.0) < 1e-9);
	assert_true(m->window_start_ns <= 3600 * NS && 3600 * NS < m->window_start_ns + 60 * NS);
	fg_peak_free(m);
	test_free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(weighted_shares_follow_weights),
		cmocka_unit_test(returning_tenant_gets_no_credit_for_idle_time),
		cmocka_unit_test(blocked_head_does_not_stall_others),
		cmocka_unit_test(head_waiting_for_a_shared_resource_holds_others),
		cmocka_unit_test(expire_and_remove),
		cmocka_unit_test(kv_caps),
		cmocka_unit_test(engine_window_lets_any_size_go_in_turn),
		cmocka_unit_test(engine_counts_start_non_streamed_requests),
		cmocka_unit_test(engine_waiting_holds_even_with_nothing_pending),
		cmocka_unit_test(peaks_and_oversubscription),
	};
	return cmocka_run_group_tests_name("fair_queue", tests, NULL, NULL);
}
