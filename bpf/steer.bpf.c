// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* steer.bpf.c — the sk_lookup program of transparent mode: a new TCP
 * connection to a protected port in the node's namespace is handed to the
 * agent's listening socket (kept in the FG_MAP_STEER_SOCK SOCKMAP) instead of the
 * engine listening on that port, so the engine's deployment does not change.
 *
 *   not TCP / not a protected port          → no opinion (normal lookup)
 *   the agent's own upstream connection     → no opinion: it must reach the
 *     (made on this node, see made_here();    engine
 *      and to agent.engine or from a
 *      source port in the exempt range)
 *   tenant in a shed window, SYN not already
 *     judged by gate on its interface        → SK_DROP (refused), unless the
 *                                              allowance lets it through
 *   agent listener present                   → that socket
 *   no agent listener (agent down)           → no opinion: fail-open to the
 *                                              engine; or SK_DROP with
 *                                              FG_STEER_FAIL_CLOSED
 *
 * Only connections made on this node can be exempt: a remote client's
 * source is never a local address (the kernel drops such martians), so it
 * cannot dodge the agent by dialling agent.engine's address or picking an
 * exempt source port.
 *
 * The agent's own socket, when the agent picked it (private_port), takes
 * connections only from steer and from this node.
 */
#include <linux/bpf.h>
#include <linux/in.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "maps/fairgate_maps.bpf.h"
#include "bpf/attribute.bpf.h"
#include "bpf/judge.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define CTX(field) (*(volatile typeof(field) *)&(field))

#ifndef AF_INET
#define AF_INET 2
#define AF_INET6 10
#endif

struct {
	__uint(type, BPF_MAP_TYPE_SOCKMAP);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} FG_MAP_STEER_SOCK SEC(".maps");

/* The port of the agent's socket when the agent chose it (transparent mode
 * without agent.listen): it is bound to the wildcard address, for IPv4 and
 * IPv6 alike, but only steer and this node may reach it. 0 = none. */
__u32 private_port = 0;

/* The source address this node's connections to agent.engine get (the
 * agent asks the kernel with a UDP connect; fg_src_key form; 0 = unknown).
 * Usually agent.engine's own address, but not for 127.0.0.2-style or
 * secondary addresses, whose routes name another preferred source. */
__u32 engine_src[4] = {};

static __always_inline int same_addr(const __u32 *x, const __u32 *y)
{
	return x[0] == y[0] && x[1] == y[1] && x[2] == y[2] && x[3] == y[3];
}

static __always_inline int is_loopback(const __u32 *w)
{
	if (w[0] || w[1])
		return 0;
	if (w[2] == bpf_htonl(0xffff)) /* 127.0.0.0/8 */
		return (w[3] & bpf_htonl(0xff000000)) == bpf_htonl(0x7f000000);
	return !w[2] && w[3] == bpf_htonl(1); /* ::1 */
}

/* A connection made on this node. The kernel refuses packets from outside
 * that claim a local or loopback source (martians), so a remote client
 * cannot pass for one: its source is never the destination address, a
 * loopback address or the node's own source towards the engine. */
static __always_inline int made_here(const struct fg_src_key *remote,
				     const struct fg_src_key *local)
{
	const __u32 *r = (const __u32 *)remote->addr;

	return same_addr(r, (const __u32 *)local->addr) || is_loopback(r) ||
	       ((engine_src[0] | engine_src[1] | engine_src[2] | engine_src[3]) &&
		same_addr(r, engine_src));
}

static __always_inline int is_engine_path(const struct fg_node_state *n,
					  const struct fg_src_key *local, __u16 port)
{
	const __u32 *a = (const __u32 *)local->addr;
	const __u32 *e = (const __u32 *)n->steer_engine_addr;

	return n->steer_engine_port == port && a[0] == e[0] && a[1] == e[1] && a[2] == e[2] &&
	       a[3] == e[3];
}

static __always_inline int judged_by_gate(const struct fg_node_state *n, __u32 ifindex)
{
	for (int i = 0; i < FG_MAX_GATE_IFACES; i++) {
		if (i >= n->n_gate_ifindex)
			break;
		if (n->gate_ifindex[i] == ifindex)
			return 1;
	}
	return 0;
}

/* Refuse a tenant inside a shed window (the allowance aside). */
static __always_inline int refused(struct fg_node_state *n, const struct fg_src_key *remote,
				   __u32 ifindex)
{
	struct fg_tenant_counters *tc;
	struct fg_tenant_state *t;
	__u64 now;
	__u32 tid;
	int id, shared;

	if (judged_by_gate(n, ifindex))
		return 0;
	now = bpf_ktime_get_coarse_ns();
	id = fg_attribute_indexed(n, remote, now, &shared);
	if (id < -1)
		id = fg_attribute(remote, NULL);
	if (id < 0)
		return 0;
	tid = (__u32)id;
	t = bpf_map_lookup_elem(&FG_MAP_TENANTS, &tid);
	tc = bpf_map_lookup_elem(&FG_MAP_TENANT_STATS, &tid);
	if (!t || !tc || !(t->flags & FG_TENANT_ACTIVE))
		return 0;
	if (*(volatile __u64 *)&t->deny_until_ns <= now ||
	    *(volatile __u32 *)&t->verdict != FG_VERDICT_SHED)
		return 0;
	if (fg_allowance_take(t, n, now)) {
		tc->allowance_used++;
		return 0;
	}
	tc->steer_refused++;
	return 1;
}

/* Nobody to hand the connection to: the engine takes it (fail-open), or,
 * with agent.steer_fail_open: false, nobody does (the client gets an RST). */
static __always_inline int no_listener(const struct fg_node_state *n,
				       struct fg_node_counters *nc)
{
	nc->steer_no_listener++;
	return n->steer_flags & FG_STEER_FAIL_CLOSED ? SK_DROP : SK_PASS;
}

SEC("sk_lookup")
int fg_steer(struct bpf_sk_lookup *ctx)
{
	/* 8-aligned: the source index reads the address as two 64-bit words */
	struct fg_src_key remote __attribute__((aligned(8))), local;
	struct fg_node_counters *nc;
	struct fg_node_state *n;
	struct bpf_sock *sk;
	__u32 zero = 0;
	__u16 sport, port;
	long err;

	if (ctx->protocol != IPPROTO_TCP)
		return SK_PASS;
	n = bpf_map_lookup_elem(&FG_MAP_NODE, &zero);
	if (!n || !(n->steer_flags & FG_STEER_ON))
		return SK_PASS;
	port = (__u16)ctx->local_port;
	if (port != private_port && !fg_port_protected(n, port))
		return SK_PASS;

	/* Every ctx field read once, up front, with volatile loads: the
	 * verifier only allows ctx reads at a constant offset from ctx itself,
	 * and clang otherwise merges the IPv4 and IPv6 reads behind a computed
	 * pointer. */
	__u32 family = CTX(ctx->family);
	__u32 rip4 = CTX(ctx->remote_ip4), lip4 = CTX(ctx->local_ip4);
	__u32 rip6[4] = { CTX(ctx->remote_ip6[0]), CTX(ctx->remote_ip6[1]),
			  CTX(ctx->remote_ip6[2]), CTX(ctx->remote_ip6[3]) };
	__u32 lip6[4] = { CTX(ctx->local_ip6[0]), CTX(ctx->local_ip6[1]),
			  CTX(ctx->local_ip6[2]), CTX(ctx->local_ip6[3]) };
	__u32 ifindex = CTX(ctx->ingress_ifindex);

	if (family == AF_INET) {
		fg_src_from_v4(&remote, rip4);
		fg_src_from_v4(&local, lip4);
	} else if (family == AF_INET6) {
		__builtin_memcpy(remote.addr, rip6, 16);
		__builtin_memcpy(local.addr, lip6, 16);
	} else {
		return SK_PASS;
	}
	int from_here = made_here(&remote, &local);

	/* The agent's own loopback-only socket is reachable through steer. */
	if (port == private_port && port && !fg_port_protected(n, port))
		return from_here ? SK_PASS : SK_DROP;

	nc = bpf_map_lookup_elem(&FG_MAP_NODE_STATS, &zero);
	if (!nc)
		return SK_PASS;
	sport = bpf_ntohs(ctx->remote_port);
	if (from_here && (is_engine_path(n, &local, port) ||
			  (n->steer_exempt_hi && sport >= n->steer_exempt_lo &&
			   sport <= n->steer_exempt_hi))) {
		nc->steer_exempt++;
		return SK_PASS;
	}
	/* a SYN made on this node never went through gate, whatever ifindex says */
	if (refused(n, &remote, from_here ? 0 : ifindex))
		return SK_DROP;

	sk = bpf_map_lookup_elem(&FG_MAP_STEER_SOCK, &zero);
	if (!sk)
		return no_listener(n, nc);
	err = bpf_sk_assign(ctx, sk, 0);
	bpf_sk_release(sk);
	if (err) /* e.g. an IPv6 connection and an IPv4 agent socket */
		return no_listener(n, nc);
	nc->steered++;
	return SK_PASS;
}
