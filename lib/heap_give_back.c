/* heap_give_back.c — see heap_give_back.h. */
#include "lib/heap_give_back.h"

#include <malloc.h>

size_t fg_heap_free_bytes(void)
{
	struct mallinfo2 m = mallinfo2();
	return m.fordblks;
}

bool fg_heap_give_back(struct fg_heap_give_back *g, uint64_t activity, size_t min_free)
{
	if (activity == g->activity || fg_heap_free_bytes() < min_free)
		return false;
	g->activity = activity;
	malloc_trim(0);
	g->given++;
	return true;
}
