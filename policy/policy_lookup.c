/* policy_lookup.c — finding a tenant or tier of a parsed policy by name or
 * key hash. Apart from policy_parse.c so the schema's decoders (which
 * resolve a tenant's tier) and the parser do not call each other. */
#include <stdint.h>
#include <string.h>

#include "policy/policy.h"

const struct fg_tenant *fg_policy_tenant_by_name(const struct fg_policy *p, const char *name)
{
	for (uint32_t i = 0; i < p->n_tenants; i++)
		if (!strcmp(p->tenants[i].name, name))
			return &p->tenants[i];
	return NULL;
}

const struct fg_tenant *fg_policy_tenant_by_key_hash(const struct fg_policy *p,
						     const uint8_t hash[32])
{
	for (uint32_t i = 0; i < p->n_tenants; i++)
		for (uint32_t k = 0; k < p->tenants[i].n_keys; k++)
			if (!memcmp(p->tenants[i].keys[k], hash, 32))
				return &p->tenants[i];
	return NULL;
}

int fg_policy_tier_by_name(const struct fg_policy *p, const char *name)
{
	for (uint32_t i = 0; i < p->n_tiers; i++)
		if (!strcmp(p->tiers[i].name, name))
			return (int)i;
	return -1;
}
