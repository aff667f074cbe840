/* kv_ledger.c — per-tenant and node KV reservations; see kv_ledger.h. */
#include <stdlib.h>
#include <string.h>
#include "kv_ledger.h"

uint64_t fg_kv_tokens(uint64_t prompt_tokens, uint64_t max_output_tokens, uint32_t n)
{
	return (uint64_t)(n ? n : 1) * (prompt_tokens + max_output_tokens);
}

int fg_kv_init(struct fg_kv_ledger *l, uint64_t pool_tokens, double headroom, uint32_t n_tenants)
{
	uint32_t slots = fg_tenant_slots(n_tenants);

	memset(l, 0, sizeof(*l));
	if (!(headroom > 0) || headroom > 1)
		headroom = 1;
	l->node_cap = (uint64_t)((double)pool_tokens * headroom);
	l->cap = calloc(slots, sizeof(*l->cap));
	l->reserved = calloc(slots, sizeof(*l->reserved));
	l->protect = calloc(slots, sizeof(*l->protect));
	if (!l->cap || !l->reserved || !l->protect) {
		fg_kv_free(l);
		return -1;
	}
	l->slots = slots;
	return 0;
}

void fg_kv_free(struct fg_kv_ledger *l)
{
	free(l->cap);
	free(l->reserved);
	free(l->protect);
	l->cap = l->reserved = NULL;
	l->protect = NULL;
	l->slots = 0;
}

void fg_kv_set_cap(struct fg_kv_ledger *l, uint32_t tenant, uint64_t cap_tokens)
{
	if (tenant < l->slots)
		l->cap[tenant] = cap_tokens;
}

uint64_t fg_kv_node_cap_for(const struct fg_kv_ledger *l, uint32_t tenant)
{
	if (!l->node_cap || !l->reserve || (tenant < l->slots && l->protect[tenant]))
		return l->node_cap;
	return l->reserve < l->node_cap ? l->node_cap - l->reserve : 0;
}

enum fg_kv_verdict fg_kv_check(const struct fg_kv_ledger *l, uint32_t tenant, uint64_t tokens)
{
	if (tenant >= l->slots)
		return FG_KV_NEVER_TENANT;
	uint64_t cap = l->cap[tenant];
	if (cap && tokens > cap)
		return FG_KV_NEVER_TENANT;
	/* what the protected could still take is not this tenant's to use */
	uint64_t kept = 0, node_cap = fg_kv_node_cap_for(l, tenant);
	if (!l->protect[tenant] && l->reserve) {
		uint64_t reserve = l->reserve < l->node_cap ? l->reserve : l->node_cap;
		kept = reserve > l->protected_reserved ? reserve - l->protected_reserved : 0;
	}
	if (l->node_cap && (!node_cap || tokens > node_cap))
		return FG_KV_NEVER_NODE;
	if (cap && l->reserved[tenant] + tokens > cap)
		return FG_KV_WAIT;
	if (l->node_cap && l->node_reserved + kept + tokens > l->node_cap)
		return FG_KV_WAIT_NODE;
	return FG_KV_OK;
}

enum fg_kv_verdict fg_kv_reserve(struct fg_kv_ledger *l, uint32_t tenant, uint64_t tokens)
{
	enum fg_kv_verdict v = fg_kv_check(l, tenant, tokens);

	if (v == FG_KV_OK) {
		l->reserved[tenant] += tokens;
		l->node_reserved += tokens;
		if (l->protect[tenant])
			l->protected_reserved += tokens;
	}
	return v;
}

void fg_kv_release(struct fg_kv_ledger *l, uint32_t tenant, uint64_t tokens)
{
	if (tenant >= l->slots)
		return;
	/* Clamp rather than wrap: a double release must not turn into a huge
	 * reservation that blocks the tenant forever. */
	uint64_t held = tokens < l->reserved[tenant] ? tokens : l->reserved[tenant];

	l->reserved[tenant] -= held;
	l->node_reserved -= held < l->node_reserved ? held : l->node_reserved;
	if (l->protect[tenant])
		l->protected_reserved -= held < l->protected_reserved ? held : l->protected_reserved;
}

void fg_kv_recount_protected(struct fg_kv_ledger *l)
{
	l->protected_reserved = 0;
	for (uint32_t i = 0; i < l->slots; i++)
		if (l->protect[i])
			l->protected_reserved += l->reserved[i];
}

void fg_kv_set_protected(struct fg_kv_ledger *l, uint32_t tenant, bool protect)
{
	if (tenant >= l->slots || l->protect[tenant] == protect)
		return;
	l->protect[tenant] = protect;
	if (protect)
		l->protected_reserved += l->reserved[tenant];
	else
		l->protected_reserved -= l->reserved[tenant] < l->protected_reserved
			? l->reserved[tenant] : l->protected_reserved;
}

void fg_kv_set_reserve(struct fg_kv_ledger *l, uint64_t tokens)
{
	l->reserve = tokens;
}
