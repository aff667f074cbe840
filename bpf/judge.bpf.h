/* judge.bpf.h — what gate and steer share to judge a new connection once
 * it is attributed: whether its port is protected, and a tenant's two GCRA
 * budgets (the allowance through a deny window, the RST budget of a shed
 * one). BPF side only. */
#ifndef FAIRGATE_JUDGE_BPF_H
#define FAIRGATE_JUDGE_BPF_H

#include <bpf/bpf_helpers.h>
#include "maps/fairgate_maps.h"

static __always_inline int fg_port_protected(const struct fg_node_state *n, __u16 port)
{
	for (int i = 0; i < FG_MAX_PROTECTED_PORTS; i++) {
		if (i >= (int)n->n_protected_ports)
			break;
		if (n->protected_ports[i] == port)
			return 1;
	}
	return 0;
}

/* One GCRA over a 64-bit "theoretical arrival time": at most burst takes
 * at once, then one per interval, and the limit holds across CPUs without
 * a lock. A spent budget costs one load and a compare, which is what a
 * flood meets. */
static __always_inline int fg_gcra_take(__u64 *tat_ns, __u64 interval, __u32 burst, __u64 now)
{
	__u64 tolerance = interval * (burst - 1), tat, base;

	for (int i = 0; i < 4; i++) {
		tat = *(volatile __u64 *)tat_ns;
		base = tat > now ? tat : now;
		if (base - now > tolerance)
			return 0;
		if (__sync_val_compare_and_swap(tat_ns, tat, base + interval) == tat)
			return 1;
	}
	return 0; /* lost the race four times: another CPU took it */
}

/* The allowance: SYNs let through a deny window (0 = none). */
static __always_inline int fg_allowance_take(struct fg_tenant_state *t, const struct fg_node_state *n,
					     __u64 now)
{
	if (!n->allow_interval_ns || !n->allow_burst)
		return 0;
	return fg_gcra_take(&t->allow_tat_ns, n->allow_interval_ns, n->allow_burst, now);
}

/* The RST budget: may this shed SYN be answered with an RST (no budget
 * configured = always)? */
static __always_inline int fg_rst_budget_take(struct fg_tenant_state *t, const struct fg_node_state *n,
					      __u64 now)
{
	if (!n->rst_interval_ns || !n->rst_burst)
		return 1;
	return fg_gcra_take(&t->rst_tat_ns, n->rst_interval_ns, n->rst_burst, now);
}

#endif
