/* heap_give_back.h — a burst's freed heap pages back to the kernel once it
 * is over.
 *
 * glibc gives freed memory back only from the top of a heap, past
 * M_TRIM_THRESHOLD. What a burst of requests frees (their exchanges,
 * buffers and bodies) lies between blocks still in use (the structs of the
 * connections that stay open, the tenant tables), where no top trim
 * reaches: a process that served a burst keeps the burst's RSS while it
 * idles. malloc_trim(0) hands every whole free page of every arena back
 * (MADV_DONTNEED) and the top too. It walks each arena's free chunks under
 * that arena's lock, so the caller asks only at a quiet moment (nothing in
 * flight), and it runs only when something was done since the last time
 * and enough lies free to be worth it. */
#ifndef FAIRGATE_HEAP_GIVE_BACK_H
#define FAIRGATE_HEAP_GIVE_BACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fg_heap_give_back {
	uint64_t activity; /* the caller's count at the last give-back */
	uint64_t given;    /* give-backs so far */
};

/* At a quiet moment: trim when ACTIVITY (the caller's monotonic count of
 * what allocates: requests begun, say) moved since the last give-back and
 * at least MIN_FREE bytes of the heap are free. true: trimmed. */
bool fg_heap_give_back(struct fg_heap_give_back *g, uint64_t activity, size_t min_free);

/* Free bytes in the heap (all arenas, glibc's mallinfo2 fordblks): what a
 * give-back may hand back, counted whether or not it still is resident. */
size_t fg_heap_free_bytes(void);

#endif
