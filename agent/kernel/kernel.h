/* kernel.h — fairgated's side of the BPF datapath: pinned maps, the XDP
 * `gate` and sk_lookup `steer` programs, and publishing tenant state.
 * Owned by the datapath; the proxy only calls the publish functions.
 *
 * Every publish function is a no-op returning 0 when st->kernel is NULL
 * (--no-bpf, or the kernel part failed to open), so callers need no checks.
 * Tenant ids are indices into st->policy->tenants (== the map keys). */
#ifndef FAIRGATE_KERNEL_H
#define FAIRGATE_KERNEL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include "agent/agent.h"
#include "maps/src_index.h"
#include "maps/fairgate_maps.h"

/* Mount bpffs if needed, create or reuse the pins, fill tenants and static
 * sources from st->policy, attach programs. On failure returns -1 with one
 * human line in err (which capability or kernel feature is missing). */
int fg_kernel_open(struct fg_agent_state *st, char *err, size_t errlen);
/* Re-fill tenant names/tiers/sources after a policy reload. Deny windows,
 * counters and learned sources follow tenants by name. */
int fg_kernel_apply_policy(struct fg_agent_state *st, const struct fg_policy *p);
/* Detach programs; unpin maps only with opts.cleanup. */
void fg_kernel_close(struct fg_agent_state *st);

/* The quota state the proxy/controller publishes per tenant. */
struct fg_tenant_pub {
	double bucket_units;      /* may be negative (debt) */
	double rate_units_per_s;
	double burst_units;
	double reserved_units;
	uint64_t kv_resident_tokens;
	uint64_t kv_cap_tokens;
	uint32_t inflight;
	uint32_t queued;
	uint64_t admitted;
	uint64_t rejected;
	/* the books, kept across restarts (fg_tenant_quota's; the doubles are
	 * stored there in thousandths) */
	uint64_t settled, written_off, long_context, timed_out, exact_counts, cut_off,
		usage_clamped;
	double units_billed, units_refunded, units_written_off;
	double output_tokens_billed, output_units_billed, typical_cost;
	uint64_t outcomes[FG_QUOTA_OUTCOMES];
};

int fg_kernel_publish_tenant(struct fg_agent_state *st, uint32_t tenant_id,
			     const struct fg_tenant_pub *pub);
/* What the pinned map last held for a tenant (a previous fairgated's
 * publish, or ours): false without kernel enforcement, when never
 * published (updated_ns 0), or when a writer died inside a publish. */
bool fg_kernel_read_quota(struct fg_agent_state *st, uint32_t tenant_id,
			  struct fg_tenant_quota *out);
/* The same, as the publish that wrote it (the inverse of
 * fg_kernel_publish_tenant, to a thousandth of a unit); *updated_ns (may be
 * NULL) is when it was published. */
bool fg_kernel_read_pub(struct fg_agent_state *st, uint32_t tenant_id, struct fg_tenant_pub *out,
			uint64_t *updated_ns);

/* Open (until_ns > now, verdict FG_VERDICT_DELAY/SHED) or clear (until_ns 0
 * or verdict FG_VERDICT_ALLOW) a tenant's deny window. until_ns is
 * CLOCK_MONOTONIC (fg_now_ns()). The operator's `fairgatectl tenant deny`
 * writes exactly these fields too (deny_source tells them apart). */
int fg_kernel_set_deny(struct fg_agent_state *st, uint32_t tenant_id, uint64_t until_ns,
		       int verdict);
int fg_kernel_set_deny_from(struct fg_agent_state *st, uint32_t tenant_id, uint64_t until_ns,
			    int verdict, int source /* enum fg_deny_source */);
/* Read the window back: returns the verdict in force now (FG_VERDICT_ALLOW
 * when none or expired); *until_ns may be NULL. */
int fg_kernel_get_deny(struct fg_agent_state *st, uint32_t tenant_id, uint64_t *until_ns);
/* The same with who opened it (enum fg_deny_source; FG_DENY_NONE when no
 * window is in force): what `fairgatectl status` reports is what gate
 * enforces, whoever wrote it (this agent, its predecessor, the operator). */
int fg_kernel_get_deny_from(struct fg_agent_state *st, uint32_t tenant_id, uint64_t *until_ns,
			    int *source);

/* Remember that `peer` authenticated as tenant_id, so the next SYN from that
 * address is judged as that tenant. An address seen with two tenants is
 * marked shared and no longer attributed (NAT, proxies). */
int fg_kernel_learn_source(struct fg_agent_state *st, const struct sockaddr *peer,
			   uint32_t tenant_id);

/* Node overload: shed new connections of tiers with rank <= level
 * (fg_kernel_tier_rank); -1 = none. It holds FG_OVERLOAD_LEASE_NS: call
 * again to renew it while it lasts. */
int fg_kernel_set_overload_tier(struct fg_agent_state *st, int level);
/* Rank of a policy tier: 0 = lowest. Tiers are ordered by weight, then
 * by position in the policy file. */
int fg_kernel_tier_rank(const struct fg_policy *p, uint32_t tier);

/* steer: hand TCP connections to the protected ports over to listen_fd
 * (the agent's listening socket). -1 removes it (fail-open). */
int fg_kernel_steer_listener(struct fg_agent_state *st, int listen_fd);
/* The agent's listener is bound to the wildcard address on a port it chose
 * (so it takes IPv4 and IPv6): steer refuses connections to that port that
 * were not made on this node, so clients reach it only through steer. */
int fg_kernel_steer_private_port(struct fg_agent_state *st, uint16_t port);
/* Whether steer is attached (transparent mode with kernel enforcement). */
bool fg_kernel_steering(const struct fg_agent_state *st);
/* Where gate (XDP) runs and where it does not, for `fairgatectl status`:
 * every interface of the policy (or that `interfaces: auto` found), attached
 * or with the reason it is not; a missing interface turns off gate there
 * only. */
struct fg_gate_iface {
	char ifname[FG_IFNAME_MAX];
	bool attached;
	bool native;              /* attached in native (driver) mode, else generic */
	char why[320];            /* not attached: why */
};
struct fg_gate_status {
	bool auto_ifaces;         /* the policy said `interfaces: auto` */
	int n;
	struct fg_gate_iface ifaces[FG_MAX_IFACES];
	char note[200];           /* nothing to attach to: why ("" otherwise) */
};
void fg_kernel_gate_status(const struct fg_agent_state *st, struct fg_gate_status *out);
/* Mount bpffs at /sys/fs/bpf unless it is one already: 1 mounted, 0 it
 * was, -1 with err (needs CAP_SYS_ADMIN). `fairgated --mount-bpffs`. */
int fg_kernel_mount_bpffs(char *err, size_t errlen);

/* gate's source index: whether it answers now and its rebuilds so far;
 * false without kernel enforcement. */
bool fg_kernel_source_index(struct fg_agent_state *st, struct fg_src_index_stats *out);

#endif
