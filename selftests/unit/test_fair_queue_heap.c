/* test_fair_queue_heap.c — the fair queue's heaps make exactly the choices
 * of the linear scans they replaced: a copy of the scans (the reference,
 * below) and policy/fair_queue.c run side by side on many random pushes,
 * pops with skips and holds, removals, charges, completions and expiries,
 * and must agree on every item chosen and every counter, bit for bit. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "policy/fair_queue.h"
#include "selftests/unit/xorshift.h"

#define TENANTS 37
#define ITEMS 600

/* The reference: fair_queue.c as it was, scanning every tenant. */
struct ref_tenant {
	double weight, vtc, served;
	struct fg_fq_item *head, *tail;
	uint32_t queued, in_service;
	bool active;
};
struct ref_fq {
	struct ref_tenant t[TENANTS];
};

static void ref_update_active(struct ref_fq *q, uint32_t tenant)
{
	struct ref_tenant *t = &q->t[tenant];
	bool now_active = t->queued > 0 || t->in_service > 0;

	if (now_active && !t->active) {
		double m = INFINITY;
		for (uint32_t i = 0; i < TENANTS; i++)
			if (i != tenant && q->t[i].active && q->t[i].vtc < m)
				m = q->t[i].vtc;
		if (isfinite(m) && t->vtc < m)
			t->vtc = m;
	}
	t->active = now_active;
}

static void ref_push(struct ref_fq *q, struct fg_fq_item *it)
{
	struct ref_tenant *t = &q->t[it->tenant];
	it->next = NULL;
	if (t->tail)
		t->tail->next = it;
	else
		t->head = it;
	t->tail = it;
	t->queued++;
	ref_update_active(q, it->tenant);
}

static void ref_unlink_head(struct ref_tenant *t)
{
	struct fg_fq_item *it = t->head;
	t->head = it->next;
	if (!t->head)
		t->tail = NULL;
	it->next = NULL;
	t->queued--;
}

static struct fg_fq_item *ref_pop(struct ref_fq *q, fg_fq_admit_fn admit, void *ctx)
{
	bool tried[TENANTS] = { 0 };
	for (;;) {
		int best = -1;
		for (uint32_t i = 0; i < TENANTS; i++) {
			if (!q->t[i].head || tried[i])
				continue;
			if (best < 0 || q->t[i].vtc < q->t[best].vtc)
				best = (int)i;
		}
		if (best < 0)
			return NULL;
		struct ref_tenant *t = &q->t[best];
		enum fg_fq_verdict v = admit(t->head, ctx);
		if (v == FG_FQ_HOLD)
			return NULL;
		if (v == FG_FQ_SKIP) {
			tried[best] = true;
			continue;
		}
		struct fg_fq_item *it = t->head;
		ref_unlink_head(t);
		t->in_service++;
		t->vtc += it->dispatch_units / t->weight;
		t->served += it->dispatch_units;
		ref_update_active(q, (uint32_t)best);
		return it;
	}
}

static bool ref_remove(struct ref_fq *q, struct fg_fq_item *item)
{
	struct ref_tenant *t = &q->t[item->tenant];
	struct fg_fq_item **pp = &t->head, *prev = NULL;
	while (*pp && *pp != item) {
		prev = *pp;
		pp = &(*pp)->next;
	}
	if (!*pp)
		return false;
	*pp = item->next;
	if (t->tail == item)
		t->tail = prev;
	item->next = NULL;
	t->queued--;
	ref_update_active(q, item->tenant);
	return true;
}

static uint64_t ref_next_deadline(const struct ref_fq *q)
{
	uint64_t best = 0;
	for (uint32_t i = 0; i < TENANTS; i++) {
		const struct fg_fq_item *h = q->t[i].head;
		if (h && h->deadline_ns && (!best || h->deadline_ns < best))
			best = h->deadline_ns;
	}
	return best;
}

/* The two sides: each its own items (the links are intrusive), same index. */
struct world {
	struct fg_fq fq;
	struct ref_fq ref;
	struct fg_fq_item a[ITEMS], b[ITEMS];
	enum { IDLE, QUEUED, RUNNING } state[ITEMS];
	enum fg_fq_verdict verdict[TENANTS]; /* what admit says of a tenant's head now */
};

static enum fg_fq_verdict admit_by_tenant(const struct fg_fq_item *it, void *ctx)
{
	const struct world *w = ctx;
	return w->verdict[it->tenant];
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t draw(uint32_t n)
{
	return (uint32_t)(fg_xorshift64(&rng_state) % n);
}

static void agree(const struct world *w)
{
	uint32_t queued = 0;
	for (uint32_t i = 0; i < TENANTS; i++) {
		const struct fg_fq_tenant *t = &w->fq.t[i];
		const struct ref_tenant *r = &w->ref.t[i];
		assert_true(t->vtc == r->vtc);
		assert_true(t->served_units == r->served);
		assert_int_equal(t->queued, r->queued);
		assert_int_equal(t->in_service, r->in_service);
		assert_int_equal(t->active, r->active);
		queued += r->queued;
	}
	assert_int_equal(fg_fq_total_queued(&w->fq), queued);
	assert_int_equal(fg_fq_next_deadline(&w->fq), ref_next_deadline(&w->ref));
}

static int index_of(const struct world *w, const struct fg_fq_item *it, const struct fg_fq_item *base)
{
	(void)w;
	return it ? (int)(it - base) : -1;
}

static void same_choices_as_linear_scans(void **state)
{
	(void)state;
	struct world *w = test_calloc(1, sizeof(*w));
	static const double weights[] = { 1, 2, 0.5, 3, 1 };
	uint64_t now = 1000;

	assert_int_equal(fg_fq_init(&w->fq, TENANTS), 0);
	for (uint32_t i = 0; i < TENANTS; i++) {
		double wt = weights[draw(5)];
		fg_fq_set_weight(&w->fq, i, wt);
		w->ref.t[i].weight = wt;
	}
	for (int op = 0; op < 300000; op++) {
		uint32_t k = draw(ITEMS);
		now += draw(3);
		switch (draw(9)) {
		case 0: case 1: /* a new request */
			if (w->state[k] != IDLE)
				break;
			w->a[k].tenant = w->b[k].tenant = draw(TENANTS);
			/* units in halves, so sums stay exact and ties happen */
			w->a[k].dispatch_units = w->b[k].dispatch_units = draw(40) * 0.5;
			w->a[k].deadline_ns = w->b[k].deadline_ns = draw(3) ? now + draw(400) : 0;
			fg_fq_push(&w->fq, &w->a[k]);
			ref_push(&w->ref, &w->b[k]);
			w->state[k] = QUEUED;
			break;
		case 2: case 3: { /* dispatch, some tenants at their cap, some heads holding */
			for (uint32_t i = 0; i < TENANTS; i++) {
				uint32_t d = draw(12);
				w->verdict[i] = d < 8 ? FG_FQ_GO : d < 11 ? FG_FQ_SKIP : FG_FQ_HOLD;
			}
			struct fg_fq_item *x = fg_fq_pop(&w->fq, admit_by_tenant, w);
			struct fg_fq_item *y = ref_pop(&w->ref, admit_by_tenant, w);
			int i = index_of(w, x, w->a);
			assert_int_equal(i, index_of(w, y, w->b));
			if (i >= 0)
				w->state[i] = RUNNING;
			break;
		}
		case 4: /* output streams */
			if (w->state[k] == RUNNING) {
				double u = draw(10) * 0.25;
				fg_fq_charge(&w->fq, w->a[k].tenant, u);
				w->ref.t[w->b[k].tenant].vtc += u / w->ref.t[w->b[k].tenant].weight;
				w->ref.t[w->b[k].tenant].served += u;
			}
			break;
		case 5: /* finished */
			if (w->state[k] == RUNNING) {
				fg_fq_done(&w->fq, w->a[k].tenant);
				struct ref_tenant *r = &w->ref.t[w->b[k].tenant];
				r->in_service--;
				ref_update_active(&w->ref, w->b[k].tenant);
				w->state[k] = IDLE;
			}
			break;
		case 6: /* the client left while queued (or never was) */
			assert_int_equal(fg_fq_remove(&w->fq, &w->a[k]),
					 w->state[k] == QUEUED ? ref_remove(&w->ref, &w->b[k]) : false);
			if (w->state[k] == QUEUED)
				w->state[k] = IDLE;
			break;
		case 7: { /* deadlines: the same set expires (the order is by deadline now) */
			bool gone[ITEMS] = { 0 };
			struct fg_fq_item *x;
			uint64_t last = 0;
			while ((x = fg_fq_expire(&w->fq, now))) {
				assert_true(x->deadline_ns <= now && x->deadline_ns >= last);
				last = x->deadline_ns;
				gone[x - w->a] = true;
			}
			for (uint32_t i = 0; i < TENANTS; i++) {
				struct fg_fq_item *h;
				while ((h = w->ref.t[i].head) && h->deadline_ns && h->deadline_ns <= now) {
					ref_unlink_head(&w->ref.t[i]);
					ref_update_active(&w->ref, i);
					assert_true(gone[h - w->b]);
					gone[h - w->b] = false;
					w->state[h - w->b] = IDLE;
				}
			}
			for (uint32_t i = 0; i < ITEMS; i++)
				assert_false(gone[i]);
			break;
		}
		default:
			break;
		}
		agree(w);
	}
	fg_fq_free(&w->fq);
	test_free(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(same_choices_as_linear_scans),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
