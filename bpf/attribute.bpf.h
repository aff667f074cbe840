/* attribute.bpf.h — which tenant a source address belongs to, the same
 * way in gate and steer: from the source index (fairgated's compiled copy
 * of the maps, see fairgate_maps.h) while a current half holds the answer,
 * else from the maps themselves (a learned address that is not shared
 * wins, else the policy's CIDRs). BPF side only. */
#ifndef FAIRGATE_ATTRIBUTE_BPF_H
#define FAIRGATE_ATTRIBUTE_BPF_H

#include <bpf/bpf_endian.h>
#include "maps/fairgate_maps.bpf.h"

/* Both programs attribute sources the same way: a learned address that is
 * not shared wins, else the policy's CIDRs; -1 = unattributed. *shared says
 * a learned entry was skipped because it is shared. */
static __always_inline int fg_attribute_src(const struct fg_src_key *src, int *shared)
{
	struct fg_src_learned *learned = bpf_map_lookup_elem(&FG_MAP_SRC_LEARNED, src);
	struct fg_lpm_key lk;
	struct fg_src_static *st;

	*shared = 0;
	if (learned) {
		if (!(learned->flags & FG_SRC_SHARED))
			return (int)learned->tenant_id;
		*shared = 1;
	}
	lk.prefixlen = 128;
	__builtin_memcpy(lk.addr, src->addr, sizeof(lk.addr));
	st = bpf_map_lookup_elem(&FG_MAP_SRC_TENANT, &lk);
	return st ? (int)st->tenant_id : -1;
}

/* The same, counting skipped shared sources in nc (may be NULL). */
static __always_inline int fg_attribute(const struct fg_src_key *src, struct fg_node_counters *nc)
{
	int shared, id = fg_attribute_src(src, &shared);

	if (shared && nc)
		nc->shared_source++;
	return id;
}

/* Whether a src_index slot holds (tag, a0, a1). Volatile loads: fairgated
 * may be writing the slot, which the caller's seqlock check then catches. */
static __always_inline int fg_index_holds(const struct fg_src_index_slot *e, __u32 tag, __u64 a0,
					  __u64 a1)
{
	return *(volatile __u32 *)&e->tag == tag && *(volatile __u64 *)&e->addr[0] == a0 &&
	       *(volatile __u64 *)&e->addr[1] == a1;
}

/* The static table of a src_index half: the answer for (tag, a0, a1), 0 if
 * it does not hold it. */
static __always_inline __u32 fg_index_find(__u32 base, __u32 mask, __u32 hash, __u32 tag,
					   __u64 a0, __u64 a1, const __u32 probes)
{
#pragma clang loop unroll(disable)
	for (__u32 i = 0; i < probes; i++) {
		__u32 at = base + ((hash + i) & mask);
		struct fg_src_index_slot *e = bpf_map_lookup_elem(&FG_MAP_SRC_INDEX, &at);

		if (!e || !*(volatile __u32 *)&e->tag)
			return 0;
		if (fg_index_holds(e, tag, a0, a1))
			return *(volatile __u32 *)&e->answer;
	}
	return 0;
}

/* The learned table of half h: the answer for address (a0, a1), 0 if it
 * does not hold it. The fingerprints are scanned, a slot read only on a
 * match. */
static __always_inline __u32 fg_index_find_learned(__u32 h, __u32 mask, __u32 hash, __u64 a0,
						   __u64 a1)
{
	__u16 fp = fg_src_index_fp(hash);

#pragma clang loop unroll(disable)
	for (__u32 i = 0; i < FG_IDX_PROBES; i++) {
		__u32 slot = (hash + i) & mask, w = h * FG_IDX_FP_WORDS + (slot >> 2), at;
		__u64 *word = bpf_map_lookup_elem(&FG_MAP_SRC_INDEX_FP, &w);
		struct fg_src_index_slot *e;
		__u16 f;

		if (!word)
			return 0;
		f = (__u16)(*(volatile __u64 *)word >> ((slot & 3) * 16));
		if (!f)
			return 0;
		if (f != fp)
			continue;
		at = h * FG_IDX_HALF_SLOTS + slot;
		e = bpf_map_lookup_elem(&FG_MAP_SRC_INDEX, &at);
		if (!e)
			return 0;
		if (fg_index_holds(e, 1, a0, a1))
			return *(volatile __u32 *)&e->answer;
	}
	return 0;
}

/* fg_attribute_src from the source index when a current half holds the
 * answer: a tenant id below FG_MAP_MAX_TENANTS or -1 (with *shared), or
 * -2 = ask the maps. */
static __always_inline int fg_attribute_indexed(const struct fg_node_state *n,
						 const struct fg_src_key *src, __u64 now,
						 int *shared)
{
	const __u64 *a = (const __u64 *)src->addr;
	__u32 h = *(volatile __u32 *)&n->idx_active & 1;
	const struct fg_src_index_head *hd = &n->idx[h];
	__u32 seq = *(volatile __u32 *)&hd->seq, base = h * FG_IDX_HALF_SLOTS, answer, nl;
	__u64 built = *(volatile __u64 *)&hd->built_ns;
	int id = -1;

	*shared = 0;
	/* gate's clock may lag the rebuilder's by a tick or two: a half read
	 * from the maps "in the future" by that much is young, not stale */
	if ((seq & 1) || !*(volatile __u32 *)&hd->valid || built > now + FG_IDX_CLOCK_SLACK_NS ||
	    (now > built && now - built > FG_IDX_MAX_AGE_NS))
		return -2;
	/* the rest of the header strictly after seq: the check at the end
	 * covers only what was read in between */
	asm volatile("" ::: "memory");
	answer = fg_index_find_learned(h, *(volatile __u32 *)&hd->learned_mask &
						  (FG_IDX_LEARNED_SLOTS - 1),
				       fg_src_index_hash(hd->hash_key, a[0], a[1], 0), a[0], a[1]);
	if (answer && !(answer & FG_IDX_SHARED)) {
		id = fg_src_index_tenant(answer);
		goto check;
	}
	*shared = answer != 0;
	nl = *(volatile __u8 *)&hd->n_lens;
	if (nl > FG_IDX_MAX_LENS)
		return -2; /* the static part is the trie's */
#pragma clang loop unroll(disable)
	for (__u32 i = 0; i < FG_IDX_MAX_LENS; i++) {
		__u32 len, tag;
		__u64 m0, m1;

		if (i >= nl)
			break;
		len = *(volatile __u8 *)&hd->lens[i];
		tag = 1 + len;
		m0 = a[0] & fg_prefix_mask64(len);
		m1 = len > 64 ? a[1] & fg_prefix_mask64(len - 64) : 0;
		answer = fg_index_find(base + FG_IDX_LEARNED_SLOTS,
				       *(volatile __u32 *)&hd->static_mask & (FG_IDX_STATIC_SLOTS - 1),
				       fg_src_index_hash(hd->hash_key, m0, m1, tag), tag, m0, m1,
				       FG_IDX_STATIC_PROBES);
		if (answer) {
			id = fg_src_index_tenant(answer);
			break;
		}
	}
check:
	/* Everything read while no writer touched the half. */
	asm volatile("" ::: "memory");
	if (*(volatile __u32 *)&hd->seq != seq)
		return -2;
	return id;
}

static __always_inline void fg_src_from_v4(struct fg_src_key *k, __be32 addr)
{
	__u32 *w = (__u32 *)k->addr;

	w[0] = 0;
	w[1] = 0;
	w[2] = bpf_htonl(0xffff);
	w[3] = addr;
}

#endif
