/* policy_schema.h — the policy file's keys, as tables for policy_decode.c.
 *
 * fg_policy_schema is the root: replica, tiers, tenants, agent, decoded in
 * that order whatever order the file uses, because tiers check against the
 * replica's KV pool and tenants resolve `replicas` with the cost model and
 * name tiers. Cross-tenant uniqueness (keys, sources) is policy_conflicts.c.
 */
#ifndef FAIRGATE_POLICY_SCHEMA_H
#define FAIRGATE_POLICY_SCHEMA_H

#include "policy_decode.h"

extern const struct fg_schema fg_policy_schema;

/* Defaults for keys a tier leaves out. */
#define FG_TIER_DEFAULT_WEIGHT 1.0
#define FG_TIER_DEFAULT_MAX_CONTEXT 32768
#define FG_TIER_DEFAULT_KV_CAP_TOKENS 131072
#define FG_TIER_DEFAULT_BURST_S 60.0
#define FG_TIER_DEFAULT_MAX_QUEUE_S 30.0
#define FG_TIER_DEFAULT_MAX_TOKENS 1024

#endif
