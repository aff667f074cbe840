/* yajl_arena.c — a bump allocator over a caller's block; see yajl_arena.h. */
#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/yajl_arena.h"

/* Every block, in the arena or from malloc, starts with its size, so a
 * realloc knows how much to copy and a free knows where the block began. */
struct hdr {
	alignas(max_align_t) size_t size;
};
#define ALIGN (sizeof(struct hdr))

static size_t round_up(size_t n)
{
	return (n + ALIGN - 1) & ~(ALIGN - 1);
}

void fg_arena_init(struct fg_arena *a, void *mem, size_t cap)
{
	a->funcs.malloc = fg_arena_malloc;
	a->funcs.realloc = fg_arena_realloc;
	a->funcs.free = fg_arena_free;
	a->funcs.ctx = a;
	a->base = mem;
	a->cap = cap & ~(ALIGN - 1);
	a->used = 0;
}

static struct hdr *hdr_of(void *p)
{
	return (struct hdr *)p - 1;
}

static int in_arena(const struct fg_arena *a, const void *p)
{
	uintptr_t x = (uintptr_t)p, b = (uintptr_t)a->base;

	return x > b && x <= b + a->cap;
}

void *fg_arena_malloc(void *ctx, size_t n)
{
	struct fg_arena *a = ctx;
	size_t need = sizeof(struct hdr) + round_up(n);
	struct hdr *h;

	if (n > a->cap || a->cap - a->used < need) {
		if (n > SIZE_MAX - sizeof(struct hdr) || !(h = malloc(sizeof(struct hdr) + n)))
			return NULL;
	} else {
		h = (struct hdr *)(a->base + a->used);
		a->used += need;
	}
	h->size = n;
	return h + 1;
}

void fg_arena_free(void *ctx, void *p)
{
	struct fg_arena *a = ctx;

	if (!p)
		return;
	struct hdr *h = hdr_of(p);
	if (!in_arena(a, p)) {
		free(h);
		return;
	}
	/* the newest block goes back; older ones wait for the whole arena */
	if ((char *)p + round_up(h->size) == a->base + a->used)
		a->used = (size_t)((char *)h - a->base);
}

void *fg_arena_realloc(void *ctx, void *p, size_t n)
{
	struct fg_arena *a = ctx;

	if (!p)
		return fg_arena_malloc(ctx, n);
	struct hdr *h = hdr_of(p);
	if (!in_arena(a, p)) {
		if (n > SIZE_MAX - sizeof(struct hdr))
			return NULL;
		h = realloc(h, sizeof(struct hdr) + n);
		if (!h)
			return NULL;
		h->size = n;
		return h + 1;
	}
	size_t end = (size_t)((char *)p - a->base);
	if (end + round_up(h->size) == a->used && n <= a->cap - end) {
		/* the newest block grows (or shrinks) where it is */
		h->size = n;
		a->used = end + round_up(n);
		return p;
	}
	if (n <= h->size) {
		h->size = n;
		return p;
	}
	void *q = fg_arena_malloc(ctx, n);
	if (!q)
		return NULL;
	memcpy(q, p, h->size);
	fg_arena_free(ctx, p);
	return q;
}
