/* huge_pages.c — transparent huge pages under the big per-tenant arrays; see huge_pages.h. */
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "lib/huge_pages.h"

size_t fg_advise_huge(void *p, size_t len)
{
	if (!p || len < FG_HUGE_PAGE)
		return 0;
	uintptr_t start = ((uintptr_t)p + FG_HUGE_PAGE - 1) & ~(uintptr_t)(FG_HUGE_PAGE - 1);
	uintptr_t end = ((uintptr_t)p + len) & ~(uintptr_t)(FG_HUGE_PAGE - 1);
	if (end <= start)
		return 0;
	/* the pages between p and start, and past end, belong to the same
	 * block but may share a page with malloc's other blocks: not advised */
	if (madvise((void *)start, end - start, MADV_HUGEPAGE))
		return 0;
	return end - start;
}

void *fg_calloc_huge(size_t n, size_t size)
{
	void *p = calloc(n, size);

	/* calloc checked n * size for overflow, so the product is exact here */
	if (p)
		fg_advise_huge(p, n * size);
	return p;
}
