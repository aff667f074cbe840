/* fair_queue.c — VTC weighted fair queueing; see fair_queue.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/huge_pages.h"
#include "lib/id_heap.h"
#include "fair_queue.h"

/* Smallest counter first; ties by tenant id, for determinism. */
static bool by_vtc(uint32_t a, uint32_t b, const void *ctx)
{
	const struct fg_fq *fq = ctx;
	double va = fq->t[a].vtc, vb = fq->t[b].vtc;

	return va < vb || (!(vb < va) && a < b);
}

static bool by_deadline(uint32_t a, uint32_t b, const void *ctx)
{
	const struct fg_fq *fq = ctx;
	uint64_t da = fq->t[a].head->deadline_ns, db = fq->t[b].head->deadline_ns;

	return da < db || (da == db && a < b);
}

static struct fg_idheap ready_heap(struct fg_fq *fq)
{
	return (struct fg_idheap){ fq->ready, fq->ready_pos, &fq->n_ready, by_vtc, fq };
}

static struct fg_idheap active_heap(struct fg_fq *fq)
{
	return (struct fg_idheap){ fq->active, fq->active_pos, &fq->n_active, by_vtc, fq };
}

static struct fg_idheap due_heap(struct fg_fq *fq)
{
	return (struct fg_idheap){ fq->due, fq->due_pos, &fq->n_due, by_deadline, fq };
}

int fg_fq_init(struct fg_fq *fq, uint32_t n_tenants)
{
	uint32_t slots = fg_tenant_slots(n_tenants);

	memset(fq, 0, sizeof(*fq));
	fq->t = fg_calloc_huge(slots, sizeof(*fq->t));
	/* the seven id arrays in one block: heap orders, places, scratch */
	fq->ready = calloc((size_t)slots * 7, sizeof(uint32_t));
	if (!fq->t || !fq->ready) {
		fg_fq_free(fq);
		return -1;
	}
	fq->ready_pos = fq->ready + slots;
	fq->active = fq->ready + 2 * (size_t)slots;
	fq->active_pos = fq->ready + 3 * (size_t)slots;
	fq->due = fq->ready + 4 * (size_t)slots;
	fq->due_pos = fq->ready + 5 * (size_t)slots;
	fq->skipped = fq->ready + 6 * (size_t)slots;
	fq->slots = slots;
	fq->n_tenants = n_tenants > slots ? slots : n_tenants;
	for (uint32_t i = 0; i < slots; i++)
		fq->t[i].weight = 1;
	return 0;
}

void fg_fq_free(struct fg_fq *fq)
{
	free(fq->t);
	free(fq->ready);
	memset(fq, 0, sizeof(*fq));
}

void fg_fq_set_weight(struct fg_fq *fq, uint32_t tenant, double weight)
{
	if (tenant >= fq->slots || !(weight > 0))
		return;
	if (tenant >= fq->n_tenants)
		fq->n_tenants = tenant + 1;
	fq->t[tenant].weight = weight;
}

/* The tenant's counter moved: every heap keyed by it follows. */
static void vtc_moved(struct fg_fq *fq, uint32_t tenant)
{
	struct fg_idheap ready = ready_heap(fq), active = active_heap(fq);

	fg_idheap_fix(&ready, tenant);
	fg_idheap_fix(&active, tenant);
}

/* The tenant's head changed (or went): the ready and due heaps follow. */
static void head_moved(struct fg_fq *fq, uint32_t tenant)
{
	const struct fg_fq_item *h = fq->t[tenant].head;
	struct fg_idheap ready = ready_heap(fq), due = due_heap(fq);

	if (h)
		fg_idheap_insert(&ready, tenant);
	else
		fg_idheap_remove(&ready, tenant);
	if (h && h->deadline_ns)
		fg_idheap_insert(&due, tenant);
	else
		fg_idheap_remove(&due, tenant);
}

static void update_active(struct fg_fq *fq, uint32_t tenant)
{
	struct fg_fq_tenant *t = &fq->t[tenant];
	struct fg_idheap active = active_heap(fq);
	bool now_active = t->queued > 0 || t->in_service > 0;

	if (now_active && !t->active) {
		/* Returning from idle: no credit for the time away. The heap
		 * holds the others only: this tenant is not active yet. */
		if (!fg_idheap_empty(&active)) {
			double m = fq->t[fg_idheap_top(&active)].vtc;
			if (isfinite(m) && t->vtc < m) {
				t->vtc = m;
				vtc_moved(fq, tenant);
			}
		}
		fg_idheap_insert(&active, tenant);
	} else if (!now_active && t->active) {
		fg_idheap_remove(&active, tenant);
	}
	t->active = now_active;
}

void fg_fq_push(struct fg_fq *fq, struct fg_fq_item *item)
{
	if (item->tenant >= fq->slots)
		return;
	if (item->tenant >= fq->n_tenants)
		fq->n_tenants = item->tenant + 1;
	struct fg_fq_tenant *t = &fq->t[item->tenant];
	bool first = !t->head;

	item->next = NULL;
	if (t->tail)
		t->tail->next = item;
	else
		t->head = item;
	t->tail = item;
	t->queued++;
	fq->total_queued++;
	fq->queued_units += item->backlog_units;
	update_active(fq, item->tenant);
	if (first)
		head_moved(fq, item->tenant);
}

/* An item left the queue: its backlog with it (0 once the queue is empty,
 * so rounding never accumulates across busy periods). */
static void count_out(struct fg_fq *fq, const struct fg_fq_item *it)
{
	fq->total_queued--;
	fq->queued_units = fq->total_queued ? fq->queued_units - it->backlog_units : 0;
}

static void unlink_head(struct fg_fq *fq, uint32_t tenant)
{
	struct fg_fq_tenant *t = &fq->t[tenant];
	struct fg_fq_item *it = t->head;

	t->head = it->next;
	if (!t->head)
		t->tail = NULL;
	it->next = NULL;
	t->queued--;
	count_out(fq, it);
	head_moved(fq, tenant);
}

struct fg_fq_item *fg_fq_pop(struct fg_fq *fq, fg_fq_admit_fn admit, void *ctx)
{
	/* Smallest counter first (ties by tenant id). A tenant whose head is
	 * skipped leaves the heap for the rest of this pop, so the next-smallest
	 * is tried; every skipped one goes back before returning. */
	struct fg_idheap ready = ready_heap(fq);
	struct fg_fq_item *it = NULL;
	uint32_t n_skipped = 0;

	while (!fg_idheap_empty(&ready)) {
		uint32_t best = fg_idheap_top(&ready);
		struct fg_fq_tenant *t = &fq->t[best];
		enum fg_fq_verdict v = admit ? admit(t->head, ctx) : FG_FQ_GO;

		if (v == FG_FQ_HOLD)
			break;
		if (v == FG_FQ_SKIP) {
			fq->skipped[n_skipped++] = fg_idheap_pop(&ready);
			continue;
		}
		it = t->head;
		unlink_head(fq, best);
		t->in_service++;
		t->vtc += it->dispatch_units / t->weight;
		t->served_units += it->dispatch_units;
		vtc_moved(fq, best);
		update_active(fq, best);
		break;
	}
	for (uint32_t i = 0; i < n_skipped; i++)
		fg_idheap_insert(&ready, fq->skipped[i]);
	return it;
}

bool fg_fq_remove(struct fg_fq *fq, struct fg_fq_item *item)
{
	if (item->tenant >= fq->n_tenants)
		return false;
	struct fg_fq_tenant *t = &fq->t[item->tenant];
	struct fg_fq_item **pp = &t->head, *prev = NULL;

	while (*pp && *pp != item) {
		prev = *pp;
		pp = &(*pp)->next;
	}
	if (!*pp)
		return false;
	bool was_head = t->head == item;
	*pp = item->next;
	if (t->tail == item)
		t->tail = prev;
	item->next = NULL;
	t->queued--;
	count_out(fq, item);
	if (was_head)
		head_moved(fq, item->tenant);
	update_active(fq, item->tenant);
	return true;
}

void fg_fq_charge(struct fg_fq *fq, uint32_t tenant, double units)
{
	if (tenant >= fq->n_tenants)
		return;
	fq->t[tenant].vtc += units / fq->t[tenant].weight;
	fq->t[tenant].served_units += units;
	vtc_moved(fq, tenant);
}

void fg_fq_done(struct fg_fq *fq, uint32_t tenant)
{
	if (tenant >= fq->n_tenants || !fq->t[tenant].in_service)
		return;
	fq->t[tenant].in_service--;
	update_active(fq, tenant);
}

struct fg_fq_item *fg_fq_expire(struct fg_fq *fq, uint64_t now_ns)
{
	/* Queues are FIFO with one deadline rule per tenant, so only heads can
	 * be the first to expire. */
	struct fg_idheap due = due_heap(fq);

	if (fg_idheap_empty(&due))
		return NULL;
	uint32_t tenant = fg_idheap_top(&due);
	struct fg_fq_item *h = fq->t[tenant].head;

	if (h->deadline_ns > now_ns)
		return NULL;
	unlink_head(fq, tenant);
	update_active(fq, tenant);
	return h;
}

uint64_t fg_fq_next_deadline(const struct fg_fq *fq)
{
	return fq->n_due ? fq->t[fq->due[0]].head->deadline_ns : 0;
}

uint32_t fg_fq_total_queued(const struct fg_fq *fq)
{
	return fq->total_queued;
}

void fg_fq_resync(struct fg_fq *fq)
{
	fq->n_ready = fq->n_active = fq->n_due = 0;
	memset(fq->ready_pos, 0, fq->slots * sizeof(*fq->ready_pos));
	memset(fq->active_pos, 0, fq->slots * sizeof(*fq->active_pos));
	memset(fq->due_pos, 0, fq->slots * sizeof(*fq->due_pos));
	struct fg_idheap active = active_heap(fq);

	for (uint32_t i = 0; i < fq->n_tenants; i++) {
		struct fg_fq_tenant *t = &fq->t[i];
		t->active = t->queued || t->in_service;
		if (t->active)
			fg_idheap_insert(&active, i);
		head_moved(fq, i);
	}
}
