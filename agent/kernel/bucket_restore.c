/* bucket_restore.c — bucket levels back from the pinned tenants map at
 * start; see bucket_restore.h. */
#include <stdio.h>

#include "agent/kernel/bucket_restore.h"
#include "agent/kernel/kernel.h"

uint32_t fg_bucket_restore(struct fg_agent_state *st, struct fg_gateway *gw, uint64_t now_ns)
{
	const struct fg_policy *p = gw->policy;
	bool fleet = p->agent.fleet.enabled;
	uint32_t restored = 0;

	for (uint32_t i = 0; i < p->n_tenants; i++) {
		struct fg_bucket *b = &gw->t[i].bucket;
		struct fg_tenant_quota q;

		if (!fg_kernel_read_quota(st, i, &q)) {
			if (fleet)
				b->level = 0; /* nothing held yet: the fleet grants it */
			continue;
		}
		/* published on this boot (CLOCK_MONOTONIC does not go back), never
		 * in the future */
		uint64_t at = q.updated_ns <= now_ns ? q.updated_ns : now_ns;
		double level = (double)q.bucket_units;
		if (!fleet)
			level += b->rate * (double)(now_ns - at) / 1e9;
		if (level > b->depth)
			level = b->depth;
		b->level = level;
		b->stamp_ns = now_ns;
		restored++;
	}
	if (restored)
		fprintf(stderr, "fairgated: %u tenant bucket(s) restored from the pinned tenants map%s\n",
			restored, fleet ? " (levels as held; the fleet bucket has the rest)"
				        : " (refilled for the time the agent was down)");
	return restored;
}
