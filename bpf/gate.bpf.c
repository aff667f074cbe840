// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* gate.bpf.c — the XDP program that judges new TCP connections per tenant.
 *
 * Only a TCP SYN without ACK (and without RST) to a protected port is judged;
 * every other packet passes untouched, so established flows never pay more
 * than a header parse. A judged SYN is attributed to a tenant (learned
 * source, else policy CIDR, else unattributed → pass) and then:
 *
 *   no deny window, no overload      → XDP_PASS
 *   inside a window or overloaded    → the allowance may still pass it,
 *                                      else delay (XDP_DROP: the client's
 *                                      TCP retries later) or shed (RST+ACK
 *                                      sent back with XDP_TX)
 *
 * Anything that cannot be parsed with certainty (truncated, fragmented,
 * unknown ethertype, bad header lengths) is not judged: XDP_PASS, and the
 * kernel's own stack decides. Failing open is the safe side here because
 * the agent behind still enforces every quota with a 429.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "maps/fairgate_maps.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define IP_MF 0x2000
#define IP_OFFSET 0x1fff
#define IP_DF 0x4000
#define RST_TTL 64
#define MAX_VLAN_TAGS 2
#define MAX_IPV6_EXT 4

struct vlan_tag {
	__be16 tci;
	__be16 proto;
};

/* What the parser learned about one SYN; offsets are from ctx->data, so
 * they survive bpf_xdp_adjust_tail(), which invalidates every pointer. */
struct syn_info {
	__u32 l3_off;
	__u32 l4_off;
	__u32 seg_len;     /* sequence space the SYN consumes: payload + SYN + FIN */
	__u16 dport;       /* host order */
	__u16 sport;
	__u8 ipv6;
	__u8 l3_extra;     /* IPv4 options or IPv6 extension headers present */
	struct fg_src_key src;
};

enum parse_result { NOT_A_SYN = 0, SYN = 1, MALFORMED = 2 };

static __always_inline struct fg_node_counters *node_counters(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&node_stats, &zero);
}

static __always_inline int is_ipv6_ext(__u8 nh)
{
	return nh == IPPROTO_HOPOPTS || nh == IPPROTO_ROUTING || nh == IPPROTO_DSTOPTS;
}

/* Walk up to MAX_IPV6_EXT extension headers; a fragment header or a longer
 * chain is not judged (-1). */
static __always_inline int parse_ipv6_exts(void *data, void *data_end, __u32 *off, __u8 *nexthdr)
{
	for (int i = 0; i < MAX_IPV6_EXT; i++) {
		struct { __u8 nexthdr, hdrlen; } *ext;

		if (!is_ipv6_ext(*nexthdr))
			return 0;
		ext = data + *off;
		if ((void *)(ext + 1) > data_end)
			return -1;
		*nexthdr = ext->nexthdr;
		*off += ((__u32)ext->hdrlen + 1) * 8;
		if (*off > 1024) /* keeps the offset small for the verifier */
			return -1;
	}
	return is_ipv6_ext(*nexthdr) ? -1 : 0;
}

static __always_inline enum parse_result parse_syn(struct xdp_md *ctx, struct syn_info *s)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct tcphdr *tcp;
	__u32 off = sizeof(*eth), l4_len, doff;
	__be16 proto;

	if ((void *)(eth + 1) > data_end)
		return NOT_A_SYN;
	proto = eth->h_proto;
	for (int i = 0; i < MAX_VLAN_TAGS; i++) {
		struct vlan_tag *tag;

		if (proto != bpf_htons(ETH_P_8021Q) && proto != bpf_htons(ETH_P_8021AD))
			break;
		tag = data + off;
		if ((void *)(tag + 1) > data_end)
			return MALFORMED;
		proto = tag->proto;
		off += sizeof(*tag);
	}
	s->l3_off = off;

	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = data + off;
		__u32 ihl, tot;

		if ((void *)(ip + 1) > data_end)
			return MALFORMED;
		if (ip->protocol != IPPROTO_TCP)
			return NOT_A_SYN;
		if (ip->version != 4 || ip->ihl < 5)
			return MALFORMED;
		if (ip->frag_off & bpf_htons(IP_MF | IP_OFFSET))
			return MALFORMED; /* a fragment: the TCP header may not be here */
		ihl = ip->ihl * 4;
		tot = bpf_ntohs(ip->tot_len);
		/* The whole datagram must be in the frame: a SYN cut short is
		 * one the stack would drop, so it is not ours to answer. */
		if (tot < ihl || (long)tot > (long)(data_end - (void *)ip))
			return MALFORMED;
		l4_len = tot - ihl;
		s->ipv6 = 0;
		s->l3_extra = ihl > sizeof(*ip);
		fg_src_from_v4(&s->src, ip->saddr);
		off += ihl;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = data + off;
		__u32 ext_start;
		__u8 nh;

		if ((void *)(ip6 + 1) > data_end)
			return MALFORMED;
		if (ip6->version != 6)
			return MALFORMED;
		if ((long)bpf_ntohs(ip6->payload_len) > (long)(data_end - (void *)(ip6 + 1)))
			return MALFORMED;
		nh = ip6->nexthdr;
		off += sizeof(*ip6);
		ext_start = off;
		if (parse_ipv6_exts(data, data_end, &off, &nh))
			return MALFORMED;
		if (nh != IPPROTO_TCP)
			return NOT_A_SYN;
		if (bpf_ntohs(ip6->payload_len) < off - ext_start)
			return MALFORMED;
		l4_len = bpf_ntohs(ip6->payload_len) - (off - ext_start);
		s->ipv6 = 1;
		s->l3_extra = off != ext_start;
		__builtin_memcpy(s->src.addr, &ip6->saddr, sizeof(s->src.addr));
	} else {
		return NOT_A_SYN;
	}

	tcp = data + off;
	if ((void *)(tcp + 1) > data_end)
		return MALFORMED;
	if (!tcp->syn || tcp->ack || tcp->rst)
		return NOT_A_SYN;
	doff = tcp->doff * 4;
	if (doff < sizeof(*tcp) || l4_len < doff)
		return MALFORMED;
	s->l4_off = off;
	s->seg_len = l4_len - doff + 1 /* SYN */ + (tcp->fin ? 1 : 0);
	s->dport = bpf_ntohs(tcp->dest);
	s->sport = bpf_ntohs(tcp->source);
	return SYN;
}

static __always_inline __u16 csum_fold(__u64 sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)~sum;
}

static __always_inline __u64 csum_words(const __u16 *w, int n)
{
	__u64 sum = 0;

	for (int i = 0; i < n; i++)
		sum += w[i];
	return sum;
}

/* Rewrite the SYN in place into the RST+ACK the kernel would have sent for a
 * closed port (RFC 9293 3.10.7.1: SEQ=0, ACK=SEG.SEQ+SEG.LEN, RST|ACK), trim
 * its options and payload, and bounce it out of the same interface. */
static __always_inline int send_rst(struct xdp_md *ctx, const struct syn_info *s)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	int new_len = (int)s->l4_off + (int)sizeof(struct tcphdr);
	struct ethhdr *eth;
	struct tcphdr *tcp;
	__u8 mac[ETH_ALEN];
	__u32 ack, l3, l4;
	__u16 port;
	__u64 sum;

	if (new_len < (int)(data_end - data) &&
	    bpf_xdp_adjust_tail(ctx, new_len - (int)(data_end - data)))
		return XDP_DROP;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;

	eth = data;
	if ((void *)(eth + 1) > data_end)
		return XDP_DROP;
	__builtin_memcpy(mac, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, mac, ETH_ALEN);

	/* Masks, not just comparisons, so the verifier keeps the bounds
	 * whatever order the compiler emits; they never change a real offset
	 * (l3 ≤ 22, l4 ≤ 62 on this path) and the checks catch anything else. */
	l3 = s->l3_off & 0x3f;
	l4 = s->l4_off & 0x7f;
	if (l3 != s->l3_off || l4 != s->l4_off)
		return XDP_DROP;
	tcp = data + l4;
	if ((void *)(tcp + 1) > data_end)
		return XDP_DROP;
	port = tcp->source;
	tcp->source = tcp->dest;
	tcp->dest = port;
	ack = bpf_ntohl(tcp->seq) + s->seg_len;
	tcp->ack_seq = bpf_htonl(ack);
	tcp->seq = 0;
	((__u16 *)tcp)[6] = bpf_htons((5 << 12) | 0x14); /* doff 5, RST|ACK */
	tcp->window = 0;
	tcp->check = 0;
	tcp->urg_ptr = 0;
	sum = csum_words((const __u16 *)tcp, sizeof(*tcp) / 2);

	if (s->ipv6) {
		struct ipv6hdr *ip6 = data + l3;
		struct in6_addr a;

		if ((void *)(ip6 + 1) > data_end)
			return XDP_DROP;
		*(__be32 *)ip6 = bpf_htonl(0x60000000);
		ip6->payload_len = bpf_htons(sizeof(*tcp));
		ip6->nexthdr = IPPROTO_TCP;
		ip6->hop_limit = RST_TTL;
		a = ip6->saddr;
		ip6->saddr = ip6->daddr;
		ip6->daddr = a;
		sum += csum_words((const __u16 *)&ip6->saddr, 16);
		sum += bpf_htons(sizeof(*tcp)) + bpf_htons(IPPROTO_TCP);
	} else {
		struct iphdr *ip = data + l3;
		__be32 a;

		if ((void *)(ip + 1) > data_end)
			return XDP_DROP;
		((__u8 *)ip)[0] = 0x45;
		ip->tos = 0;
		ip->tot_len = bpf_htons(sizeof(*ip) + sizeof(*tcp));
		ip->id = 0;
		ip->frag_off = bpf_htons(IP_DF);
		ip->ttl = RST_TTL;
		ip->protocol = IPPROTO_TCP;
		a = ip->saddr;
		ip->saddr = ip->daddr;
		ip->daddr = a;
		ip->check = 0;
		ip->check = csum_fold(csum_words((const __u16 *)ip, sizeof(*ip) / 2));
		sum += csum_words((const __u16 *)&ip->saddr, 4);
		sum += bpf_htons(sizeof(*tcp)) + bpf_htons(IPPROTO_TCP);
	}
	tcp->check = csum_fold(sum);
	return XDP_TX;
}

static __always_inline void sample_event(struct fg_node_state *n, const struct syn_info *s,
					 __u32 tid, __u32 reason, __u64 count, __u64 now)
{
	struct fg_shed_event ev;

	if ((count - 1) & n->shed_sample_mask)
		return;
	ev.ts_ns = now;
	ev.tenant_id = tid;
	ev.reason = reason;
	__builtin_memcpy(ev.saddr, s->src.addr, sizeof(ev.saddr));
	ev.sport = s->sport;
	ev.dport = s->dport;
	ev.count = (__u32)count;
	bpf_ringbuf_output(&shed_events, &ev, sizeof(ev), 0);
}

SEC("xdp")
int fg_gate(struct xdp_md *ctx)
{
	struct fg_node_counters *nc;
	struct fg_tenant_counters *tc;
	struct fg_tenant_state *t;
	struct fg_node_state *n;
	struct syn_info s = {};
	__u32 zero = 0, tid, verdict = FG_VERDICT_ALLOW, overload = 0;
	__u64 now, until;
	int id;

	switch (parse_syn(ctx, &s)) {
	case NOT_A_SYN:
		return XDP_PASS;
	case MALFORMED:
		nc = node_counters();
		if (nc)
			nc->not_judged++;
		return XDP_PASS;
	case SYN:
		break;
	}

	n = bpf_map_lookup_elem(&node, &zero);
	if (!n || !fg_port_protected(n, s.dport))
		return XDP_PASS;
	nc = node_counters();
	if (!nc)
		return XDP_PASS;
	nc->syn_judged++;

	id = fg_attribute(&s.src, nc);
	if (id < 0) {
		nc->unattributed++;
		return XDP_PASS;
	}
	tid = (__u32)id;
	t = bpf_map_lookup_elem(&tenants, &tid);
	tc = bpf_map_lookup_elem(&tenant_stats, &tid);
	if (!t || !tc || !(t->flags & FG_TENANT_ACTIVE)) {
		nc->unattributed++;
		return XDP_PASS;
	}

	/* CLOCK_MONOTONIC at tick resolution: the same timeline fg_now_ns()
	 * writes deadlines in, lagging by at most one tick (≤ 4 ms), which
	 * a window of seconds does not notice; and on a kvm-clock guest it
	 * costs ~1 ns where bpf_ktime_get_ns() costs ~23 (fg-gate-bench). */
	now = bpf_ktime_get_coarse_ns();
	until = *(volatile __u64 *)&t->deny_until_ns;
	if (until > now)
		verdict = *(volatile __u32 *)&t->verdict;
	if (verdict != FG_VERDICT_DELAY && verdict != FG_VERDICT_SHED) {
		verdict = FG_VERDICT_ALLOW;
		if (t->tier_rank < n->overload_below) {
			verdict = FG_VERDICT_SHED;
			overload = 1;
		}
	}
	if (verdict == FG_VERDICT_ALLOW) {
		tc->syn_passed++;
		return XDP_PASS;
	}
	if (fg_allowance_take(t, n, now)) {
		tc->allowance_used++;
		tc->syn_passed++;
		return XDP_PASS;
	}

	if (verdict == FG_VERDICT_DELAY) {
		tc->syn_delayed++;
		sample_event(n, &s, tid, FG_SHED_DELAY, tc->syn_delayed + tc->syn_shed, now);
		return XDP_DROP;
	}
	tc->syn_shed++;
	tc->overload_shed += overload;
	sample_event(n, &s, tid, overload ? FG_SHED_OVERLOAD : FG_SHED_RST,
		     tc->syn_delayed + tc->syn_shed, now);
	if (s.l3_extra) {
		/* An RST must not echo IPv4 options or IPv6 routing headers;
		 * rebuilding the frame without them is not worth the code for
		 * SYNs no ordinary client sends. Refuse by dropping instead. */
		nc->rst_fallback_drop++;
		return XDP_DROP;
	}
	nc->rst_sent++;
	return send_rst(ctx, &s);
}
