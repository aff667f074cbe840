/* yajl_arena.h — allocations for one short parse carved from a block the
 * caller owns (a stack array), handed to yajl as its yajl_alloc_funcs.
 *
 * A yajl handle costs about a dozen malloc/free pairs (handle, lexer,
 * byte stack, buffers), and the request scanner adds its own small tables:
 * on a small body that was more work than lexing it. Here an allocation is
 * a bump, a free of the newest block takes it back, any other free is
 * nothing until the block goes out of scope. What does not fit comes from
 * malloc and goes back to free, so a 1 MiB body still parses. */
#ifndef FAIRGATE_YAJL_ARENA_H
#define FAIRGATE_YAJL_ARENA_H

#include <stddef.h>
#include <yajl/yajl_common.h>

struct fg_arena {
	yajl_alloc_funcs funcs; /* ctx = this arena */
	char *base;
	size_t cap, used;
};

/* mem: cap bytes, aligned for any object (max_align_t), outliving every
 * block taken from the arena. */
void fg_arena_init(struct fg_arena *a, void *mem, size_t cap);
void *fg_arena_malloc(void *ctx, size_t n);
void *fg_arena_realloc(void *ctx, void *p, size_t n);
void fg_arena_free(void *ctx, void *p);

#endif
