/* id_heap.c — indexed binary min-heap; see id_heap.h. */
#include "id_heap.h"

static void place(const struct fg_idheap *h, uint32_t i, uint32_t id)
{
	h->heap[i] = id;
	h->pos[id] = i + 1;
}

/* Moves the id at i towards the root while it is less than its parent. */
static uint32_t sift_up(const struct fg_idheap *h, uint32_t i)
{
	uint32_t id = h->heap[i];

	while (i > 0) {
		uint32_t parent = (i - 1) / 2;
		if (!h->less(id, h->heap[parent], h->ctx))
			break;
		place(h, i, h->heap[parent]);
		i = parent;
	}
	place(h, i, id);
	return i;
}

static void sift_down(const struct fg_idheap *h, uint32_t i)
{
	uint32_t id = h->heap[i], n = *h->n;

	for (;;) {
		uint32_t child = 2 * i + 1;
		if (child >= n)
			break;
		if (child + 1 < n && h->less(h->heap[child + 1], h->heap[child], h->ctx))
			child++;
		if (!h->less(h->heap[child], id, h->ctx))
			break;
		place(h, i, h->heap[child]);
		i = child;
	}
	place(h, i, id);
}

static void restore(const struct fg_idheap *h, uint32_t i)
{
	if (sift_up(h, i) == i)
		sift_down(h, i);
}

void fg_idheap_insert(const struct fg_idheap *h, uint32_t id)
{
	if (h->pos[id]) {
		fg_idheap_fix(h, id);
		return;
	}
	place(h, (*h->n)++, id);
	sift_up(h, *h->n - 1);
}

void fg_idheap_remove(const struct fg_idheap *h, uint32_t id)
{
	if (!h->pos[id])
		return;
	uint32_t i = h->pos[id] - 1, last = --*h->n;

	h->pos[id] = 0;
	if (i == last)
		return;
	place(h, i, h->heap[last]);
	restore(h, i);
}

void fg_idheap_fix(const struct fg_idheap *h, uint32_t id)
{
	if (h->pos[id])
		restore(h, h->pos[id] - 1);
}

uint32_t fg_idheap_pop(const struct fg_idheap *h)
{
	uint32_t id = h->heap[0];

	fg_idheap_remove(h, id);
	return id;
}
