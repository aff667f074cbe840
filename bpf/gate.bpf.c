// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* gate.bpf.c — the XDP program that judges new TCP connections per tenant.
 *
 * Only a TCP SYN without ACK (and without RST) to a protected port is judged;
 * every other packet passes untouched, so established flows never pay more
 * than a header parse. A judged SYN is attributed to a tenant (learned
 * source, else policy CIDR, else unattributed → pass; the answer is cached
 * per source, see src_cache) and then:
 *
 *   no deny window, no overload      → XDP_PASS
 *   inside a window or overloaded    → the allowance may still pass it,
 *                                      else delay (XDP_DROP: the client's
 *                                      TCP retries later) or shed (RST+ACK
 *                                      sent back with XDP_TX, within the
 *                                      tenant's RST budget; past it, drop)
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
#include "bpf/attribute.bpf.h"
#include "bpf/judge.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define IP_MF 0x2000
#define IP_OFFSET 0x1fff
#define IP_DF 0x4000
#define RST_TTL 64
#define MAX_VLAN_TAGS 2
#define MAX_IPV6_EXT 4

/* The attribution cache: one direct-mapped slot per hash of the source,
 * holding the answer fg_attribute_src gave (tenant or -1, and whether a
 * shared learned entry was skipped), so a source costs an array load
 * instead of a hash lookup, and a CIDR-only source the LPM trie walk only
 * the first time. Not pinned: a fresh fairgated starts empty.
 *
 * Exactness: an entry is used only while its gen equals node.attr_gen,
 * which userspace bumps after changing src_learned or src_tenant. gen is
 * read before the lookups that fill an entry, so a fill racing a change is
 * stamped with the old generation and never used. seq is a seqlock: odd
 * while a CPU rewrites the entry (writers take it with a compare-and-swap
 * and give up if another CPU holds it); readers retry nothing, they fall
 * back to the lookups. And an entry lives CACHE_TTL_TICKS at most, so an
 * edit that does not bump attr_gen (bpftool on the pinned maps) still
 * takes effect within about a second. */
struct src_cache_entry {
	__u32 seq;
	__u32 gen;
	__u64 addr[2];
	__u32 answer;      /* the source index's encoding: fg_src_index_answer()
			    * | FG_IDX_SHARED (a shared learned entry skipped) */
	__u32 filled;      /* jiffies, low 32 bits */
};

#define CACHE_TTL_TICKS 256 /* 1 s at HZ=250, 0.26 s at 1000, 2.6 s at 100 */

static struct src_cache_entry src_cache[FG_SRC_CACHE_SLOTS];

#define barrier() asm volatile("" ::: "memory")
#define READ_ONCE(x) (*(volatile typeof(x) *)&(x))
#define WRITE_ONCE(x, v) (*(volatile typeof(x) *)&(x) = (v))

/* gate's clock: bpf_ktime_get_coarse_ns(), CLOCK_MONOTONIC at tick
 * resolution (the timeline fg_now_ns() writes deadlines in), read through
 * the jiffies counter: the coarse clock only moves when jiffies does, and
 * bpf_jiffies64() is one load where the coarse helper is a call that cost
 * a delayed SYN a few ns (fg-gate-bench). Written ns first, jiffies last, so
 * a CPU that sees this tick's jiffies sees a reading from it or later. The
 * time read lags by at most two ticks (≤ 8 ms at HZ=250), which windows of
 * seconds and an allowance of a few SYNs per second do not notice. */
static __u64 clock_jiffies, clock_ns;

static __always_inline __u64 coarse_now(__u64 j)
{
	__u64 now;

	if (READ_ONCE(clock_jiffies) == j)
		return READ_ONCE(clock_ns);
	now = bpf_ktime_get_coarse_ns();
	WRITE_ONCE(clock_ns, now);
	barrier();
	WRITE_ONCE(clock_jiffies, j);
	return now;
}

struct vlan_tag {
	__be16 tci;
	__be16 proto;
};

/* What the parser learned about one SYN; offsets are from ctx->data, so
 * they survive bpf_xdp_adjust_tail(), which invalidates every pointer.
 * sport is filled only by a full parse, which the one path that needs it
 * (a sampled shed event) runs again for itself. */
struct syn_info {
	__u32 l3_off;
	__u32 l4_off;      /* l3_off + the IP header (with options / extensions) */
	__u16 dport;       /* host order */
	__u16 sport;
	__u8 ipv6;
	struct fg_src_key src __attribute__((aligned(8)));
};

enum parse_result { NOT_A_SYN = 0, SYN = 1, MALFORMED = 2 };

/* fg_src_from_v4 as two 64-bit stores: the attribution cache reads the key
 * as two 64-bit words right away, and a load that spans two narrower stores
 * cannot be forwarded from them (it waited ~4 ns per SYN, fg-gate-bench). */
static __always_inline void src_from_v4(struct fg_src_key *k, __be32 addr)
{
	__u64 *w = (__u64 *)k->addr;

	w[0] = 0;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	w[1] = (__u64)addr << 32 | bpf_htonl(0xffff);
#else
	w[1] = (__u64)bpf_htonl(0xffff) << 32 | addr;
#endif
}

static __always_inline struct fg_node_counters *node_counters(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&FG_MAP_NODE_STATS, &zero);
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

static __always_inline enum parse_result parse_syn(struct xdp_md *ctx, struct syn_info *s,
						   const int full)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct tcphdr *tcp;
	__u32 off = sizeof(*eth), l4_len, doff;
	__be16 proto;

	if ((void *)(eth + 1) > data_end)
		return NOT_A_SYN;
	proto = ((__be16 *)data)[6]; /* h_proto; ethhdr is packed, this is one load */
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
		src_from_v4(&s->src, ip->saddr);
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
		((__u64 *)s->src.addr)[0] = *(__u64 *)&ip6->saddr;
		((__u64 *)s->src.addr)[1] = *((__u64 *)&ip6->saddr + 1);
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
	s->dport = bpf_ntohs(tcp->dest);
	if (full)
		s->sport = bpf_ntohs(tcp->source);
	return SYN;
}

/* The same frame parsed again with every field (it has not changed). */
static __noinline int parse_full(struct xdp_md *ctx, struct syn_info *s)
{
	return parse_syn(ctx, s, 1) == SYN;
}

/* Internet checksum of a sum of native-endian 16-, 32- and 64-bit loads of
 * network-order data: 2^16 ≡ 1 (mod 0xffff), so wide words add up to the
 * same ones'-complement sum as their 16-bit halves (RFC 1071). */
static __always_inline __u16 csum_fold(__u64 sum)
{
	sum = (sum & 0xffffffff) + (sum >> 32);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)~sum;
}

static __always_inline __u64 csum_u64(__u64 w)
{
	return (w & 0xffffffff) + (w >> 32);
}

/* Shed: rewrite the SYN in place into the RST+ACK the kernel would have
 * sent for a closed port (RFC 9293 3.10.7.1: SEQ=0, ACK=SEG.SEQ+SEG.LEN,
 * RST|ACK) and bounce it out of the same interface. Nothing an RST does not
 * carry (TCP options and data, IPv4 options, IPv6 extension headers) goes
 * back: up to FG_RST_PAD_MAX bytes of it are zeroed and stay as Ethernet
 * padding behind the datagram, more are trimmed. The TCP header is rebuilt
 * from values read before, right behind a fixed-size IP header, so a SYN
 * with IP options or extension headers gets the same plain RST as any
 * other. */
static __noinline int refuse(struct xdp_md *ctx, const struct syn_info *s,
			     struct fg_node_counters *nc)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	/* Masks, not just comparisons, so the verifier keeps the bounds
	 * whatever order the compiler emits; they never change a real offset
	 * (l3 ≤ 22; parse_syn stops IPv6 extension chains near 1 KiB) and
	 * the checks catch anything else. */
	__u32 l3 = s->l3_off & 0x3f, l4 = s->l4_off & 0x7ff, rst_l4, seg_len, ports, seq, l4_len;
	struct tcphdr *tcp;
	long excess;
	__u64 sum;

	if (l3 != s->l3_off || l4 != s->l4_off)
		return XDP_DROP;
	rst_l4 = l3 + (s->ipv6 ? sizeof(struct ipv6hdr) : sizeof(struct iphdr));
	tcp = data + l4;
	if ((void *)(tcp + 1) > data_end)
		return XDP_DROP;
	ports = *(__u32 *)tcp;
	seq = tcp->seq;
	seg_len = 1 /* SYN */ + tcp->fin - tcp->doff * 4;
	if (s->ipv6) {
		struct ipv6hdr *ip6 = data + l3;

		if ((void *)(ip6 + 1) > data_end)
			return XDP_DROP;
		/* The payload length counts the extension headers too. */
		l4_len = bpf_ntohs(ip6->payload_len) - (l4 - rst_l4);
	} else {
		struct iphdr *ip = data + l3;

		if ((void *)(ip + 1) > data_end)
			return XDP_DROP;
		l4_len = bpf_ntohs(ip->tot_len) - (l4 - l3);
	}
	seg_len += l4_len;

	/* From here the SYN's TCP header may be gone: only registers. */
	excess = (long)(data_end - data) - (long)(rst_l4 + sizeof(*tcp));
	if (excess > FG_RST_PAD_MAX) {
		if (bpf_xdp_adjust_tail(ctx, (int)(rst_l4 + sizeof(*tcp)) - (int)(data_end - data))) {
			nc->rst_fallback_drop++;
			return XDP_DROP;
		}
		data = (void *)(long)ctx->data;
		data_end = (void *)(long)ctx->data_end;
	}
	rst_l4 &= 0x7f;
	tcp = data + rst_l4;
	if ((void *)(tcp + 1) > data_end || data + ETH_HLEN > data_end) {
		nc->rst_fallback_drop++;
		return XDP_DROP;
	}
	if (excess > 0 && excess <= FG_RST_PAD_MAX) {
		/* A few bytes too many (the SYN's options): zeroed where they
		 * are, as Ethernet padding behind the RST's datagram, which
		 * costs less than cutting them; never sent back as they were. */
		__u8 *p = (__u8 *)(tcp + 1);

		for (int i = 0; i < FG_RST_PAD_MAX / 8; i++) {
			if ((void *)(p + 8) > data_end)
				break;
			*(volatile __u64 *)p = 0;
			p += 8;
		}
		for (int i = 0; i < 7; i++) {
			if ((void *)(p + 1) > data_end)
				break;
			*(volatile __u8 *)p = 0;
			p++;
		}
	}
	nc->rst_sent++;

	/* Swap the MACs: dst is bytes 0-5, src 6-11. */
	{
		__u32 d03 = *(__u32 *)data, s89 = *(__u32 *)(data + 8);
		__u16 d45 = *(__u16 *)(data + 4), s67 = *(__u16 *)(data + 6);

		*(__u16 *)data = s67;
		*(__u32 *)(data + 2) = s89;
		*(__u32 *)(data + 6) = d03;
		*(__u16 *)(data + 10) = d45;
	}

	if (s->ipv6) {
		struct ipv6hdr *ip6 = data + l3;
		__u64 a0, a1, b0, b1;

		if ((void *)(ip6 + 1) > data_end)
			return XDP_DROP;
		a0 = *(__u64 *)&ip6->saddr;
		a1 = *((__u64 *)&ip6->saddr + 1);
		b0 = *(__u64 *)&ip6->daddr;
		b1 = *((__u64 *)&ip6->daddr + 1);
		*(__u32 *)ip6 = bpf_htonl(0x60000000);
		/* payload_len 20, next header TCP, hop limit */
		*((__u32 *)ip6 + 1) = bpf_htonl(20 << 16 | IPPROTO_TCP << 8 | RST_TTL);
		*(__u64 *)&ip6->saddr = b0;
		*((__u64 *)&ip6->saddr + 1) = b1;
		*(__u64 *)&ip6->daddr = a0;
		*((__u64 *)&ip6->daddr + 1) = a1;
		sum = csum_u64(a0) + csum_u64(a1) + csum_u64(b0) + csum_u64(b1);
	} else {
		struct iphdr *ip = data + l3;
		__u32 a, b;

		if ((void *)(ip + 1) > data_end)
			return XDP_DROP;
		a = ip->saddr;
		b = ip->daddr;
		/* version 4, ihl 5, tos 0, tot_len 40 | id 0, DF | ttl, TCP */
		*(__u32 *)ip = bpf_htonl(0x45000000 | 40);
		*((__u32 *)ip + 1) = bpf_htonl(IP_DF);
		*((__u32 *)ip + 2) = bpf_htonl(RST_TTL << 24 | IPPROTO_TCP << 16);
		ip->saddr = b;
		ip->daddr = a;
		ip->check = csum_fold((__u64)bpf_htonl(0x45000000 | 40) + bpf_htonl(IP_DF) +
				      bpf_htonl(RST_TTL << 24 | IPPROTO_TCP << 16) + a + b);
		sum = (__u64)a + b;
	}
	sum += bpf_htons(sizeof(*tcp)) + bpf_htons(IPPROTO_TCP); /* rest of the pseudo-header */

	/* Ports swapped (a 16-bit rotation of the first word), SEQ 0, ACK,
	 * doff 5 with RST|ACK, window, checksum and urgent pointer 0. */
	*(__u32 *)tcp = ports >> 16 | ports << 16;
	tcp->seq = 0;
	tcp->ack_seq = bpf_htonl(bpf_ntohl(seq) + seg_len);
	*((__u32 *)tcp + 3) = bpf_htonl(0x50140000);
	*((__u32 *)tcp + 4) = 0;
	sum += (__u64)ports + tcp->ack_seq + bpf_htonl(0x50140000);
	tcp->check = csum_fold(sum);
	return XDP_TX;
}

/* Out of line, like everything a judged SYN rarely needs: the hot path
 * keeps its values in registers. */
static __noinline void emit_event(struct xdp_md *ctx, __u32 tid, __u32 reason, __u64 count,
				  __u64 now)
{
	struct fg_shed_event ev;
	struct syn_info full, *s = &full;

	if (!parse_full(ctx, s))
		return;
	ev.ts_ns = now;
	ev.tenant_id = tid;
	ev.reason = reason;
	__builtin_memcpy(ev.saddr, s->src.addr, sizeof(ev.saddr));
	ev.sport = s->sport;
	ev.dport = s->dport;
	ev.count = (__u32)count;
	bpf_ringbuf_output(&FG_MAP_SHED_EVENTS, &ev, sizeof(ev), 0);
}

/* SYNs of a tenant this CPU has refused so far: delayed, shed with an
 * RST, and shed past the RST budget. */
static __always_inline __u64 refusals(const struct fg_tenant_counters *tc)
{
	return tc->syn_delayed + tc->syn_shed + tc->shed_dropped;
}

/* One event per shed_sample_mask + 1 delays and sheds of a tenant on a CPU
 * (count is that CPU's total so far, so the first is always reported). */
static __always_inline void sample_event(struct xdp_md *ctx, const struct fg_node_state *n,
					 __u32 tid, __u32 reason, __u64 count, __u64 now)
{
	if (!((count - 1) & n->shed_sample_mask))
		emit_event(ctx, tid, reason, count, now);
}

/* A cache miss: ask the maps, then fill the slot if no other CPU is
 * writing it (seq still the even value read before the lookups). seq_gen
 * is the slot's seq and the generation read before, packed. Kept out of
 * line so the hit path keeps its values in registers. */
static __noinline int attribute_slow(const struct fg_src_key *src, struct src_cache_entry *e,
				     __u64 seq_gen, struct fg_node_counters *nc)
{
	__u32 now = (__u32)bpf_jiffies64(), seq = (__u32)seq_gen, gen = (__u32)(seq_gen >> 32);
	const __u64 *a = (const __u64 *)src->addr;
	int shared, id = fg_attribute_src(src, &shared);
	/* -1, or no tenant by that id (a learned entry edited by hand), reads
	 * back as unattributed, as the index's answers do. */
	__u32 answer = fg_src_index_answer((__u32)id) | (shared ? FG_IDX_SHARED : 0);

	if (shared)
		nc->shared_source++;
	if (gen && !(seq & 1) && __sync_val_compare_and_swap(&e->seq, seq, seq + 1) == seq) {
		e->gen = gen;
		e->addr[0] = a[0];
		e->addr[1] = a[1];
		e->answer = answer;
		e->filled = now;
		barrier();
		WRITE_ONCE(e->seq, seq + 2);
	}
	return fg_src_index_tenant(answer);
}

/* Tenant id of a source (-1 = unattributed): from the source index while
 * fairgated keeps it current (a few array loads, no kernel call, the same
 * for a source's first SYN as for its thousandth); else from the cache if
 * it holds a current answer, else from the maps. Every read of a cache
 * slot is volatile, so they happen in program order between the two reads
 * of seq. */
static __always_inline int attribute(const struct syn_info *s, const struct fg_node_state *n,
				     struct fg_node_counters *nc, __u64 jiffies, __u64 now)
{
	const __u64 *a = (const __u64 *)s->src.addr;
	int shared, id = fg_attribute_indexed(n, &s->src, now, &shared);

	if (id >= -1) {
		if (shared)
			nc->shared_source++;
		return id;
	}
	nc->attr_without_index++;

	__u32 gen = READ_ONCE(n->attr_gen);
	__u32 slot = fg_src_cache_slot(n->src_hash_key, a[0], a[1]);
	struct src_cache_entry *e = &src_cache[slot & (FG_SRC_CACHE_SLOTS - 1)];
	__u32 seq = READ_ONCE(e->seq);

	if (READ_ONCE(e->gen) == gen && READ_ONCE(e->addr[0]) == a[0] &&
	    READ_ONCE(e->addr[1]) == a[1]) {
		__u32 answer = READ_ONCE(e->answer), age = (__u32)jiffies - READ_ONCE(e->filled);

		/* Unchanged and even (no writer); gen 0 = nothing cached. */
		if (READ_ONCE(e->seq) == (seq & ~1u) && gen && age < CACHE_TTL_TICKS) {
			if (answer & FG_IDX_SHARED)
				nc->shared_source++;
			return fg_src_index_tenant(answer);
		}
	}
	return attribute_slow(&s->src, e, (__u64)gen << 32 | seq, nc);
}

SEC("xdp")
int fg_gate(struct xdp_md *ctx)
{
	struct fg_node_counters *nc;
	struct fg_tenant_counters *tc;
	struct fg_tenant_state *t;
	struct fg_node_state *n;
	struct syn_info s;
	__u32 zero = 0, tid, verdict = FG_VERDICT_ALLOW, overload = 0;
	__u64 now, until, jiffies;
	int id;

	switch (parse_syn(ctx, &s, 0)) {
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

	n = bpf_map_lookup_elem(&FG_MAP_NODE, &zero);
	if (!n || !fg_port_protected(n, s.dport))
		return XDP_PASS;
	nc = node_counters();
	if (!nc)
		return XDP_PASS;
	nc->syn_judged++;

	/* Tick resolution is plenty here; on this kvm-clock guest
	 * bpf_ktime_get_ns() cost ~23 ns (fg-gate-bench). */
	jiffies = bpf_jiffies64();
	now = coarse_now(jiffies);
	id = attribute(&s, n, nc, jiffies, now);
	if (id < 0) {
		nc->unattributed++;
		return XDP_PASS;
	}
	tid = (__u32)id;
	t = bpf_map_lookup_elem(&FG_MAP_TENANTS, &tid);
	tc = bpf_map_lookup_elem(&FG_MAP_TENANT_STATS, &tid);
	if (!t || !tc || !(t->flags & FG_TENANT_ACTIVE)) {
		nc->unattributed++;
		return XDP_PASS;
	}

	/* The common case: no window, node not overloaded for this tier. */
	until = READ_ONCE(t->deny_until_ns);
	if (!until && t->tier_rank >= READ_ONCE(n->overload_below)) {
		tc->syn_passed++;
		return XDP_PASS;
	}

	if (until > now)
		verdict = READ_ONCE(t->verdict);
	if (verdict != FG_VERDICT_DELAY && verdict != FG_VERDICT_SHED) {
		verdict = FG_VERDICT_ALLOW;
		if (t->tier_rank < n->overload_below && now < READ_ONCE(n->overload_until_ns)) {
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
		sample_event(ctx, n, tid, FG_SHED_DELAY, refusals(tc), now);
		return XDP_DROP;
	}
	/* Past the tenant's RST budget a shed SYN is dropped like a delayed
	 * one: its client's TCP retries, and no RST goes to a forged source. */
	if (!fg_rst_budget_take(t, n, now)) {
		tc->shed_dropped++;
		sample_event(ctx, n, tid, FG_SHED_RST_BUDGET, refusals(tc), now);
		return XDP_DROP;
	}
	tc->syn_shed++;
	tc->overload_shed += overload;
	sample_event(ctx, n, tid, overload ? FG_SHED_OVERLOAD : FG_SHED_RST, refusals(tc), now);
	return refuse(ctx, &s, nc);
}
