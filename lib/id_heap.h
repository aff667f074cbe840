/* id_heap.h — an indexed binary min-heap of small integer ids: the one heap
 * in fairgate (the fair queue's tenants, the event loop's timers).
 *
 * The ids are array indices (tenant ids, timer slots) ordered by the caller's
 * `less`, which reads the keys from the caller's own records; each id's
 * place is kept in `pos`, so an id whose key changed is moved (fg_idheap_fix)
 * or taken out (fg_idheap_remove) in O(log n) without a search. The storage
 * is the caller's (two arrays of as many entries as there are ids), so a
 * struct that embeds them stays copyable and needs no free. */
#ifndef FAIRGATE_ID_HEAP_H
#define FAIRGATE_ID_HEAP_H

#include <stdbool.h>
#include <stdint.h>

typedef bool (*fg_idheap_less_fn)(uint32_t a, uint32_t b, const void *ctx);

struct fg_idheap {
	uint32_t *heap;          /* ids in heap order, *n of them */
	uint32_t *pos;           /* by id: 1 + its index in heap, 0 = absent */
	uint32_t *n;
	fg_idheap_less_fn less;  /* a strict total order: ties broken by the caller */
	const void *ctx;
};

static inline bool fg_idheap_contains(const struct fg_idheap *h, uint32_t id)
{
	return h->pos[id] != 0;
}
static inline bool fg_idheap_empty(const struct fg_idheap *h) { return *h->n == 0; }
/* The least id; the heap must not be empty. */
static inline uint32_t fg_idheap_top(const struct fg_idheap *h) { return h->heap[0]; }

/* Adds an absent id (a present one is fixed instead). */
void fg_idheap_insert(const struct fg_idheap *h, uint32_t id);
/* Takes an id out; absent ids are ignored. */
void fg_idheap_remove(const struct fg_idheap *h, uint32_t id);
/* The id's key changed: restore the order (absent ids are ignored). */
void fg_idheap_fix(const struct fg_idheap *h, uint32_t id);
/* Removes and returns the least id; the heap must not be empty. */
uint32_t fg_idheap_pop(const struct fg_idheap *h);

#endif
