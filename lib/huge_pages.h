/* huge_pages.h — transparent huge pages under the big per-tenant arrays.
 *
 * A request touches each per-tenant array (the policy's tenants, the
 * gateway's books, the fair queue's places, the KV ledger, the peak meter)
 * at its tenant's id. At 65,536 tenants these arrays span ~100 MB; the
 * active tenants sit anywhere in them, so in 4 KiB pages every array costs
 * the request a TLB entry of its own per tenant, where a 3-tenant policy's
 * arrays share a few pages. With the kernel's THP mode `madvise` (Debian's
 * default) only memory advised MADV_HUGEPAGE gets 2 MiB pages.
 *
 * The advice is best effort: memory without it (a kernel without THP, THP
 * `never`, a block under 2 MiB) is the same memory in small pages, and the
 * caller's malloc/calloc/realloc/free stay as they are. */
#ifndef FAIRGATE_HUGE_PAGES_H
#define FAIRGATE_HUGE_PAGES_H

#include <stddef.h>

#define FG_HUGE_PAGE (2u << 20) /* x86-64's and arm64's (4 KiB granule) PMD page */

/* Advise MADV_HUGEPAGE over the whole 2 MiB pages inside [p, p + len): a
 * block from malloc need not start on one. Returns how many bytes were
 * advised (0: the block holds no whole huge page, or madvise refused). */
size_t fg_advise_huge(void *p, size_t len);

/* calloc(n, size), the result advised as above; free() it as usual. */
void *fg_calloc_huge(size_t n, size_t size);

#endif
