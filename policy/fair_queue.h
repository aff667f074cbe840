/* fair_queue.h — per-tenant queues drained by a weighted fair scheduler.
 *
 * Virtual token counters (VTC): each tenant has a counter of service received
 * in units divided by its weight; the scheduler dispatches the head of the
 * backlogged tenant with the smallest counter. The prompt is charged at
 * dispatch, output as it streams (fg_fq_charge). A tenant that becomes active
 * again is lifted to the smallest counter among active tenants, so idle time
 * earns no credit and a returning tenant cannot starve the others. Weights
 * are the only thing tiers change here, so no tier can starve another.
 *
 * Pure logic: the caller owns the items (intrusive list), passes `now_ns`,
 * and decides with a callback whether a head item may go now (KV caps, the
 * node's KV pool). Items that wait longer than their deadline are handed back
 * by fg_fq_expire.
 *
 * Cost: every operation is O(log n) in the number of tenants. Three indexed
 * heaps (lib/id_heap.h) over the tenant ids keep what the scheduler asks
 * for: the backlogged tenants by (counter, id), the active tenants by
 * counter (the floor a returning tenant is lifted to) and the queue heads
 * that have a deadline by (deadline, id). A pop that skips k tenants at
 * their KV cap costs O((k + 1) log n).
 *
 * The bound: the tenant dispatched next always has the smallest counter, so
 * while two tenants are backlogged their counters differ by at most the
 * largest charge at dispatch (a prompt) plus what one tenant's requests
 * already in flight can still be charged (output as it streams, the
 * correction to the bill at the end), over its weight. The service they
 * receive over any interval then differs by at most twice that.
 */
#ifndef FAIRGATE_FAIR_QUEUE_H
#define FAIRGATE_FAIR_QUEUE_H

#include <stdbool.h>
#include <stdint.h>
#include "policy.h"

struct fg_fq_item {
	struct fg_fq_item *next;
	uint32_t tenant;
	double dispatch_units;   /* charged when dispatched (the prompt) */
	double backlog_units;    /* counted in fg_fq.queued_units while queued
				  * (the gateway's reservation: its backlog) */
	uint64_t enqueued_ns;
	uint64_t deadline_ns;    /* 0 = none */
	void *owner;             /* the caller's request */
};

struct fg_fq_tenant {
	double weight;
	double vtc;              /* service / weight, in units */
	double served_units;     /* total charged, for reports */
	struct fg_fq_item *head, *tail;
	uint32_t queued;
	uint32_t in_service;     /* dispatched and not yet finished */
	bool active;             /* queued or in service */
};

/* Arrays by tenant id, sized to the policy (fg_fq_init): at 65,536 tenants
 * they are ~6 MB, at 3 a few hundred bytes. A reload builds a new queue and
 * moves the old one's state across (fg_gw_reload). */
struct fg_fq {
	uint32_t n_tenants;
	uint32_t slots;          /* allocated ids: n_tenants never exceeds it */
	uint32_t total_queued;
	double queued_units;     /* sum of the queued items' backlog_units, kept
				  * at every push and unlink: no walk over tenants */
	uint32_t n_ready, n_active, n_due;
	struct fg_fq_tenant *t;
	/* heap order and each id's place (lib/id_heap.h) */
	uint32_t *ready, *ready_pos;   /* head != NULL */
	uint32_t *active, *active_pos; /* t[].active */
	uint32_t *due, *due_pos;       /* head->deadline_ns != 0 */
	uint32_t *skipped;             /* a pop's scratch: heads that may not go yet */
};

enum fg_fq_verdict {
	FG_FQ_GO = 0,
	/* it waits for a limit of its own tenant (its KV cap): try the next */
	FG_FQ_SKIP,
	/* it waits for something every tenant shares (the node's KV pool):
	 * nobody behind it goes first, or a neighbour's small requests would
	 * keep taking what frees up and hold it back for ever */
	FG_FQ_HOLD,
};
/* May this head item be dispatched now? */
typedef enum fg_fq_verdict (*fg_fq_admit_fn)(const struct fg_fq_item *item, void *ctx);

/* Room for ids 0..n_tenants-1 (at least one, at most FG_MAX_TENANTS), all
 * of weight 1. Returns -1 (and holds nothing) when out of memory. */
int fg_fq_init(struct fg_fq *fq, uint32_t n_tenants);
void fg_fq_free(struct fg_fq *fq);
/* Weight must be > 0. Keeps counters and queues (for policy reloads). */
void fg_fq_set_weight(struct fg_fq *fq, uint32_t tenant, double weight);
void fg_fq_push(struct fg_fq *fq, struct fg_fq_item *item);
/* The next item by weighted fairness whose admit() says go, removed from its
 * queue and charged dispatch_units; NULL if none may go. A tenant whose head
 * is skipped (at its KV cap) does not stall others; a head that must hold
 * stops the search. */
struct fg_fq_item *fg_fq_pop(struct fg_fq *fq, fg_fq_admit_fn admit, void *ctx);
/* Remove a queued item (client went away). Returns false if not queued. */
bool fg_fq_remove(struct fg_fq *fq, struct fg_fq_item *item);
/* Output units as they stream or at settlement. */
void fg_fq_charge(struct fg_fq *fq, uint32_t tenant, double units);
/* A dispatched item finished. */
void fg_fq_done(struct fg_fq *fq, uint32_t tenant);
/* Pop the expired item (deadline <= now) with the earliest deadline (ties:
 * the lowest tenant id), or NULL. */
struct fg_fq_item *fg_fq_expire(struct fg_fq *fq, uint64_t now_ns);
/* The earliest deadline of a queued item, 0 if none. */
uint64_t fg_fq_next_deadline(const struct fg_fq *fq);
uint32_t fg_fq_total_queued(const struct fg_fq *fq);
/* After a caller wrote counters and in_service by hand (a policy reload
 * moving tenants to new ids): active = queued or in service, and the heaps
 * follow. O(n log n). */
void fg_fq_resync(struct fg_fq *fq);

#endif
