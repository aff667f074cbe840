/* fair_queue.c — VTC weighted fair queueing; see fair_queue.h. */
#include <math.h>
#include <string.h>
#include "fair_queue.h"

void fg_fq_init(struct fg_fq *fq, uint32_t n_tenants)
{
	memset(fq, 0, sizeof(*fq));
	fq->n_tenants = n_tenants > FG_MAX_TENANTS ? FG_MAX_TENANTS : n_tenants;
	for (uint32_t i = 0; i < fq->n_tenants; i++)
		fq->t[i].weight = 1;
}

void fg_fq_set_weight(struct fg_fq *fq, uint32_t tenant, double weight)
{
	if (tenant >= FG_MAX_TENANTS || !(weight > 0))
		return;
	if (tenant >= fq->n_tenants)
		fq->n_tenants = tenant + 1;
	fq->t[tenant].weight = weight;
}

static double min_active_vtc(const struct fg_fq *fq, uint32_t except)
{
	double m = INFINITY;

	for (uint32_t i = 0; i < fq->n_tenants; i++)
		if (i != except && fq->t[i].active && fq->t[i].vtc < m)
			m = fq->t[i].vtc;
	return m;
}

static void update_active(struct fg_fq *fq, uint32_t tenant)
{
	struct fg_fq_tenant *t = &fq->t[tenant];
	bool now_active = t->queued > 0 || t->in_service > 0;

	if (now_active && !t->active) {
		/* Returning from idle: no credit for the time away. */
		double m = min_active_vtc(fq, tenant);
		if (isfinite(m) && t->vtc < m)
			t->vtc = m;
	}
	t->active = now_active;
}

void fg_fq_push(struct fg_fq *fq, struct fg_fq_item *item)
{
	if (item->tenant >= FG_MAX_TENANTS)
		return;
	if (item->tenant >= fq->n_tenants)
		fq->n_tenants = item->tenant + 1;
	struct fg_fq_tenant *t = &fq->t[item->tenant];
	item->next = NULL;
	if (t->tail)
		t->tail->next = item;
	else
		t->head = item;
	t->tail = item;
	t->queued++;
	update_active(fq, item->tenant);
}

static void unlink_head(struct fg_fq_tenant *t)
{
	struct fg_fq_item *it = t->head;

	t->head = it->next;
	if (!t->head)
		t->tail = NULL;
	it->next = NULL;
	t->queued--;
}

struct fg_fq_item *fg_fq_pop(struct fg_fq *fq, fg_fq_admit_fn admit, void *ctx)
{
	/* Smallest counter first; ties by tenant id for determinism. A tenant
	 * whose head cannot go is skipped and the next-smallest is tried. */
	uint32_t tried[FG_MAX_TENANTS / 32 + 1] = { 0 };

	for (;;) {
		int best = -1;
		for (uint32_t i = 0; i < fq->n_tenants; i++) {
			if (!fq->t[i].head || (tried[i / 32] >> (i % 32) & 1))
				continue;
			if (best < 0 || fq->t[i].vtc < fq->t[best].vtc)
				best = (int)i;
		}
		if (best < 0)
			return NULL;
		struct fg_fq_tenant *t = &fq->t[best];
		enum fg_fq_verdict v = admit ? admit(t->head, ctx) : FG_FQ_GO;
		if (v == FG_FQ_HOLD)
			return NULL;
		if (v == FG_FQ_SKIP) {
			tried[best / 32] |= 1u << (best % 32);
			continue;
		}
		struct fg_fq_item *it = t->head;
		unlink_head(t);
		t->in_service++;
		t->vtc += it->dispatch_units / t->weight;
		t->served_units += it->dispatch_units;
		update_active(fq, (uint32_t)best);
		return it;
	}
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
	*pp = item->next;
	if (t->tail == item)
		t->tail = prev;
	item->next = NULL;
	t->queued--;
	update_active(fq, item->tenant);
	return true;
}

void fg_fq_charge(struct fg_fq *fq, uint32_t tenant, double units)
{
	if (tenant >= fq->n_tenants)
		return;
	fq->t[tenant].vtc += units / fq->t[tenant].weight;
	fq->t[tenant].served_units += units;
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
	for (uint32_t i = 0; i < fq->n_tenants; i++) {
		struct fg_fq_item *h = fq->t[i].head;
		if (h && h->deadline_ns && h->deadline_ns <= now_ns) {
			unlink_head(&fq->t[i]);
			update_active(fq, i);
			return h;
		}
	}
	return NULL;
}

uint32_t fg_fq_total_queued(const struct fg_fq *fq)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < fq->n_tenants; i++)
		n += fq->t[i].queued;
	return n;
}
