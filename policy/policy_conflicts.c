/* policy_conflicts.c — duplicate API keys and overlapping source ranges;
 * see policy_conflicts.h. Source CIDRs overlap iff one contains the other, and
 * after sorting by (family, network, prefix length) any overlapping set has an
 * overlapping neighbour pair, so one pass over neighbours finds a conflict. */
#include "policy_conflicts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "policy_addr.h"

struct key_ref {
	const uint8_t *hash;
	uint32_t tenant, idx;
	const struct fg_ynode *node;
};

struct cidr_ref {
	const struct fg_cidr *cidr;
	int tenant;          /* -1: agent.trusted_proxies */
	uint32_t idx;
	const struct fg_ynode *node;
};

static bool node_before(const struct fg_ynode *a, const struct fg_ynode *b)
{
	return a->line < b->line || (a->line == b->line && a->col < b->col);
}

static int cmp_key(const void *x, const void *y)
{
	const struct key_ref *a = x, *b = y;
	int d = memcmp(a->hash, b->hash, 32);

	if (d)
		return d;
	if (a->tenant != b->tenant)
		return a->tenant < b->tenant ? -1 : 1;
	return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static int cmp_cidr(const void *x, const void *y)
{
	const struct cidr_ref *a = x, *b = y;
	int d = (int)a->cidr->family - (int)b->cidr->family;

	if (d)
		return d;
	d = memcmp(a->cidr->addr, b->cidr->addr, sizeof(a->cidr->addr));
	if (d)
		return d;
	d = (int)a->cidr->prefixlen - (int)b->cidr->prefixlen;
	if (d)
		return d;
	return node_before(a->node, b->node) ? -1 : node_before(b->node, a->node);
}

static const struct fg_ynode *list_item(const struct fg_ynode *map, const char *key, size_t i)
{
	const struct fg_ynode *list = map ? fg_ymap_get(map, key) : NULL;
	return list && list->type == FG_Y_SEQ && i < list->n ? list->items[i] : NULL;
}

static int check_keys(struct fg_pctx *c, const struct fg_ynode *tenants)
{
	const struct fg_policy *p = c->p;
	size_t n = 0;
	int rc = 0;

	for (uint32_t t = 0; t < p->n_tenants; t++)
		n += p->tenants[t].n_keys;
	if (n < 2)
		return 0;
	struct key_ref *refs = calloc(n, sizeof(*refs));
	if (!refs)
		return fg_pfail(c, NULL, "out of memory");
	n = 0;
	for (uint32_t t = 0; t < p->n_tenants; t++)
		for (uint32_t k = 0; k < p->tenants[t].n_keys; k++)
			refs[n++] = (struct key_ref){ p->tenants[t].keys[k], t, k,
						      list_item(tenants->items[t], "keys", k) };
	qsort(refs, n, sizeof(*refs), cmp_key);
	for (size_t i = 1; i < n && !rc; i++) {
		const struct key_ref *a = &refs[i - 1], *b = &refs[i];
		if (memcmp(a->hash, b->hash, 32))
			continue;
		if (a->tenant == b->tenant)
			rc = fg_pfail(c, b->node, "tenants[%u].keys[%u] repeats keys[%u] of the same tenant",
				      b->tenant, b->idx, a->idx);
		else
			rc = fg_pfail(c, b->node, "tenants[%u].keys[%u] is already a key of tenant '%s' (at %u:%u); a key identifies one tenant",
				      b->tenant, b->idx, p->tenants[a->tenant].name,
				      a->node ? a->node->line : 0, a->node ? a->node->col : 0);
	}
	free(refs);
	return rc;
}

static void describe_owner(const struct fg_policy *p, const struct cidr_ref *r, char *buf,
			   size_t len)
{
	if (r->tenant < 0)
		snprintf(buf, len, "agent.trusted_proxies[%u]", r->idx);
	else
		snprintf(buf, len, "tenants[%d].sources[%u] (tenant '%s')", r->tenant, r->idx,
			 p->tenants[r->tenant].name);
}

static int cidr_conflict(struct fg_pctx *c, const struct cidr_ref *a, const struct cidr_ref *b)
{
	char who_a[96], who_b[96], net_a[FG_CIDR_STRLEN], net_b[FG_CIDR_STRLEN];
	const char *why;

	if (node_before(b->node, a->node)) {
		const struct cidr_ref *t = a;
		a = b;
		b = t;
	}
	describe_owner(c->p, a, who_a, sizeof(who_a));
	describe_owner(c->p, b, who_b, sizeof(who_b));
	fg_cidr_format(a->cidr, net_a, sizeof(net_a));
	fg_cidr_format(b->cidr, net_b, sizeof(net_b));
	if (a->tenant >= 0 && a->tenant != b->tenant)
		why = "a source address must map to one tenant";
	else
		why = "list each range once";
	return fg_pfail(c, b->node, "%s %s overlaps %s %s (at %u:%u); %s", who_b, net_b, who_a,
			net_a, a->node->line, a->node->col, why);
}

/* Sort and compare neighbours; refs is freed. */
static int check_overlaps(struct fg_pctx *c, struct cidr_ref *refs, size_t n)
{
	int rc = 0;

	qsort(refs, n, sizeof(*refs), cmp_cidr);
	for (size_t i = 1; i < n && !rc; i++)
		if (fg_cidr_overlap(refs[i - 1].cidr, refs[i].cidr))
			rc = cidr_conflict(c, &refs[i - 1], &refs[i]);
	free(refs);
	return rc;
}

/* Tenant sources against each other, and trusted proxies against each
 * other. A tenant range inside a trusted-proxy range is allowed: the kernel's
 * longest-prefix match gives the tenant's range to the tenant. */
static int check_cidrs(struct fg_pctx *c, const struct fg_ynode *tenants,
		       const struct fg_ynode *agent)
{
	const struct fg_policy *p = c->p;
	size_t n = 0;

	for (uint32_t t = 0; t < p->n_tenants; t++) {
		if (n + p->tenants[t].n_sources > FG_MAX_POLICY_SOURCES)
			return fg_pfail(c, list_item(tenants->items[t], "sources",
						     (uint32_t)(FG_MAX_POLICY_SOURCES - n)),
					"more than %d sources in all tenants (the kernel's "
					"src_tenant map holds that many)", FG_MAX_POLICY_SOURCES);
		n += p->tenants[t].n_sources;
	}
	if (n > 1) {
		struct cidr_ref *refs = calloc(n, sizeof(*refs));
		if (!refs)
			return fg_pfail(c, NULL, "out of memory");
		n = 0;
		for (uint32_t t = 0; t < p->n_tenants; t++)
			for (uint32_t k = 0; k < p->tenants[t].n_sources; k++)
				refs[n++] = (struct cidr_ref){ &p->tenants[t].sources[k], (int)t, k,
							       list_item(tenants->items[t], "sources", k) };
		if (check_overlaps(c, refs, n))
			return -1;
	}
	n = p->agent.n_trusted_proxies;
	if (n > 1) {
		struct cidr_ref *refs = calloc(n, sizeof(*refs));
		if (!refs)
			return fg_pfail(c, NULL, "out of memory");
		for (uint32_t k = 0; k < n; k++)
			refs[k] = (struct cidr_ref){ &p->agent.trusted_proxies[k], -1, k,
						     list_item(agent, "trusted_proxies", k) };
		if (check_overlaps(c, refs, n))
			return -1;
	}
	return 0;
}

int fg_policy_check_conflicts(struct fg_pctx *c)
{
	const struct fg_ynode *tenants = fg_ymap_get(c->root, "tenants");
	const struct fg_ynode *agent = fg_ymap_get(c->root, "agent");

	if (!tenants || tenants->type != FG_Y_SEQ)
		return 0;
	return check_keys(c, tenants) || check_cidrs(c, tenants, agent) ? -1 : 0;
}
