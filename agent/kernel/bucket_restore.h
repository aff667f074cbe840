/* bucket_restore.h — a restarted fairgated takes its tenants' bucket levels
 * back from the pinned `tenants` map (struct fg_tenant_quota: the level and
 * when it was published) instead of handing every tenant a fresh burst.
 *
 * Alone, a node's bucket is the contract: the level comes back refilled at
 * the contract's rate for the time the agent was down, as if it had never
 * stopped. Under agent.fleet the local bucket holds units the fleet granted:
 * the level comes back as it was (nothing refilled while nobody reported
 * it), and the fleet bucket in Redis, which the node draws on at once, has
 * the rest of the state. Without pins (first start, --cleanup, --no-bpf)
 * a tenant starts full alone, empty under the fleet. */
#ifndef FAIRGATE_BUCKET_RESTORE_H
#define FAIRGATE_BUCKET_RESTORE_H

#include <stdint.h>
#include "agent/agent.h"
#include "policy/gateway.h"

/* Returns how many tenants were restored from the pins. */
uint32_t fg_bucket_restore(struct fg_agent_state *st, struct fg_gateway *gw, uint64_t now_ns);

#endif
