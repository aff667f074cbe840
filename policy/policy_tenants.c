/* policy_tenants.c — a policy's tenant array: sized to the policy, freed
 * with it, copied deep, put in name order for matching by name; and the
 * hash tenant names are indexed by. */
#include <stdlib.h>
#include <string.h>

#include "lib/huge_pages.h"
#include "policy/policy.h"

uint32_t fg_tenant_name_hash(const char *s)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	return h;
}

int fg_policy_alloc_tenants(struct fg_policy *p, uint32_t n)
{
	struct fg_tenant *t = n ? fg_calloc_huge(n, sizeof(*t)) : NULL;

	if (n && !t)
		return -1;
	free(p->tenants);
	p->tenants = t;
	p->tenants_cap = n;
	return 0;
}

struct fg_tenant *fg_policy_add_tenant(struct fg_policy *p)
{
	if (p->n_tenants >= FG_MAX_TENANTS)
		return NULL;
	if (p->n_tenants == p->tenants_cap) {
		uint32_t cap = p->tenants_cap ? p->tenants_cap * 2 : 4;
		struct fg_tenant *t;

		if (cap > FG_MAX_TENANTS)
			cap = FG_MAX_TENANTS;
		t = realloc(p->tenants, (size_t)cap * sizeof(*t));
		if (!t)
			return NULL;
		/* the block may have moved (into a mapping of its own): advise it again */
		fg_advise_huge(t, (size_t)cap * sizeof(*t));
		p->tenants = t;
		p->tenants_cap = cap;
	}
	struct fg_tenant *t = &p->tenants[p->n_tenants];
	memset(t, 0, sizeof(*t));
	t->id = p->n_tenants++;
	return t;
}

void fg_policy_release(struct fg_policy *p)
{
	if (!p)
		return;
	free(p->tenants);
	p->tenants = NULL;
	p->n_tenants = p->tenants_cap = 0;
}

void fg_policy_free(struct fg_policy *p)
{
	fg_policy_release(p);
	free(p);
}

int fg_policy_copy(struct fg_policy *dst, const struct fg_policy *src)
{
	*dst = *src;
	dst->tenants = NULL;
	dst->tenants_cap = 0;
	if (!src->n_tenants)
		return 0;
	dst->tenants = fg_calloc_huge(src->n_tenants, sizeof(*dst->tenants));
	if (!dst->tenants) {
		dst->n_tenants = 0;
		return -1;
	}
	dst->tenants_cap = src->n_tenants;
	memcpy(dst->tenants, src->tenants, (size_t)src->n_tenants * sizeof(*dst->tenants));
	return 0;
}

/* qsort has no context argument; qsort_r's is glibc's, which we build on. */
static int by_name(const void *a, const void *b, void *ctx)
{
	const struct fg_tenant *t = ctx;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	int c = strcmp(t[x].name, t[y].name);

	return c ? c : (x > y) - (x < y); /* equal names: by id, so the first comes first */
}

uint32_t *fg_policy_name_order(const struct fg_policy *p)
{
	uint32_t *order = p->n_tenants ? malloc((size_t)p->n_tenants * sizeof(*order)) : NULL;

	if (!order)
		return NULL;
	for (uint32_t i = 0; i < p->n_tenants; i++)
		order[i] = i;
	qsort_r(order, p->n_tenants, sizeof(*order), by_name, p->tenants);
	return order;
}

const struct fg_tenant *fg_policy_find_sorted(const struct fg_policy *p, const uint32_t *order,
					      const char *name)
{
	size_t lo = 0, hi = p->n_tenants;

	if (!order) /* no memory for the order: scanned (slow, still right) */
		return fg_policy_tenant_by_name(p, name);
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(p->tenants[order[mid]].name, name);

		if (!c)
			return &p->tenants[order[mid]];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}
