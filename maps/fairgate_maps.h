/* fairgate_maps.h — the kernel/user ABI: every struct that crosses between
 * the BPF programs (bpf/gate.bpf.c, bpf/steer.bpf.c) and userspace
 * (fairgated, fairgatectl, the tests), plus map names and pin paths.
 *
 * Included by both sides, so it uses only <linux/types.h> types. The map
 * definitions themselves live in fairgate_maps.bpf.h (BPF side); userspace
 * finds the maps by pinned name under FG_PIN_DIR. The limits a policy must
 * fit are in fairgate_limits.h (policy/ takes them from there).
 *
 * Compatibility: libbpf refuses to reuse a pinned map whose key/value size
 * or flags differ, so changing a struct here means a node must drop the old
 * pins once (`fairgated --cleanup`). Append fields; do not reorder.
 * fairgate_maps_layout.h pins every struct's size and field offsets, so a
 * change is made there on purpose or fails the build.
 */
#ifndef FAIRGATE_MAPS_H
#define FAIRGATE_MAPS_H

#include <linux/types.h>

#include "maps/fairgate_limits.h"

#define FG_PIN_DIR "/sys/fs/bpf/fairgate"

/* Map names, each spelled once: the macro is the map's identifier in the
 * BPF definitions (fairgate_maps.bpf.h: `} FG_MAP_NODE SEC(".maps")`, and
 * so a skeleton's field, skel->maps.FG_MAP_NODE), and FG_MAP_NAME() of it
 * is the string userspace finds it by, in a BPF object or as the pin's
 * file name under the pin dir. At most 15 characters (BPF_OBJ_NAME_LEN,
 * checked in fairgate_maps_layout.h); no macro may be named like a map. */
#define FG_MAP_TENANTS      tenants      /* array, mmapable: struct fg_tenant_state */
#define FG_MAP_TENANT_STATS tenant_stats /* percpu array: struct fg_tenant_counters */
#define FG_MAP_SRC_TENANT   src_tenant   /* LPM trie: policy CIDRs → tenant */
#define FG_MAP_SRC_LEARNED  src_learned  /* hash: learned source → tenant (aged by the agent) */
#define FG_MAP_NODE         node         /* array[1], mmapable: struct fg_node_state */
#define FG_MAP_NODE_STATS   node_stats   /* percpu array[1]: struct fg_node_counters */
#define FG_MAP_SHED_EVENTS  shed_events  /* ringbuf: struct fg_shed_event */
#define FG_MAP_SRC_INDEX    src_index    /* array, mmapable: struct fg_src_index_slot,
					  * gate's compiled copy of the two above */
#define FG_MAP_SRC_INDEX_FP src_index_fp /* array, mmapable: __u64, the learned
					  * slots' 16-bit fingerprints, four a word */
#define FG_MAP_STEER_SOCK   steer_sock   /* sockmap[1], steer's, not pinned: the
					  * agent's listener */

#define FG_MAP_NAME_(id) #id
#define FG_MAP_NAME(id) FG_MAP_NAME_(id) /* FG_MAP_NODE -> "node" */

#define FG_PIN_STEER_LINK   "steer_link"   /* steer's netns bpf_link, pinned only
					    * with agent.steer_fail_open: false */
#define FG_PIN_GATE_PROG    "gate_prog"    /* the gate program while it is attached:
					    * a restarted fairgated knows its
					    * predecessor's gate by id, which needs
					    * no CAP_SYS_ADMIN (naming it would) */

#define FG_SHED_RING_BYTES  (256 * 1024)
/* gate's RST for a SYN with at most this many bytes more than the RST's
 * datagram (options, a little data, IPv6 extension headers) keeps the
 * frame's length, the surplus zeroed as Ethernet padding behind the
 * datagram: cheaper than bpf_xdp_adjust_tail. Longer SYNs are trimmed. */
#define FG_RST_PAD_MAX 64

/* What the datapath does with a tenant's new connections. */
enum fg_verdict {
	FG_VERDICT_ALLOW = 0,
	FG_VERDICT_DELAY = 1, /* drop the SYN; the client's TCP retries later */
	FG_VERDICT_SHED = 2,  /* answer RST+ACK (gate) / refuse (steer) */
};

enum fg_tenant_flags {
	FG_TENANT_ACTIVE = 1u << 0, /* slot holds a tenant of the current policy */
};

#define FG_QUOTA_OUTCOMES 16 /* room for enum fg_outcome (checked where it is defined) */

/* The published quota state (written by the agent's controller, read by
 * fairgatectl and bpftool; the BPF programs do not use it). Whole units. */
struct fg_tenant_quota {
	__s64 bucket_units;       /* token bucket level; < 0 = in debt */
	__u64 rate_units_per_s;
	__u64 burst_units;
	__u64 reserved_units;     /* priced but not yet settled */
	__u64 kv_resident_tokens;
	__u64 kv_cap_tokens;
	__u32 inflight;           /* requests inside the engine */
	__u32 queued;             /* requests waiting in the gateway queue */
	__u64 admitted;
	__u64 rejected;
	/* CLOCK_MONOTONIC of the last publish (0 = never: the policy's
	 * figures), strictly increasing, and FG_QUOTA_WRITING while a publish
	 * rewrites the other fields: a seqlock, so a reader copies the
	 * fields and keeps the copy only if this was the same, not
	 * FG_QUOTA_WRITING, before and after (fg_quota_snapshot). */
	__u64 updated_ns;
	/* The books: totals since the tenant entered the map, published with
	 * the rest and read back by a restarted fairgated, so a crash resets
	 * none of them (fractional figures in thousandths: _milli). */
	__u64 settled;            /* admitted requests that ended, any way */
	__u64 written_off;        /* admitted requests a dead fairgated left
				   * in flight: billed as reserved */
	__u64 long_context;       /* admitted to the long-context pool */
	__u64 timed_out;          /* waited past the tier's max_queue_s */
	__u64 exact_counts;       /* admissions decided on /tokenize's count */
	__u64 cut_off;            /* streams cut when their prompt broke a limit */
	__u64 usage_clamped;      /* engine usage above what the bytes make */
	__u64 units_billed_milli;
	__u64 units_refunded_milli;
	__u64 units_written_off_milli; /* reserved by the written_off requests */
	__u64 output_tokens_billed_milli;
	__u64 output_units_billed_milli;
	__u64 typical_cost_milli; /* the EWMA a quota window's length is made of */
	/* requests by how they ended, indexed by enum fg_outcome
	 * (agent/proxy/tenant_table.h; names: fg_outcome_names, the keys of
	 * `fairgatectl status --json`'s "outcomes") */
	__u64 outcomes[FG_QUOTA_OUTCOMES];
};

#define FG_QUOTA_WRITING (~0ULL)

/* One tenant; array index = tenant id = index in the policy's tenant list.
 *
 * The deny window: the datapath judges a new connection by `verdict` while
 * bpf_ktime_get_ns() < deny_until_ns (CLOCK_MONOTONIC, so fg_now_ns()).
 * Writers store verdict first and deny_until_ns last, so a reader that sees
 * the new deadline also sees the new verdict.
 *
 * The allowance lets a few SYNs through a deny window so some clients still
 * reach the agent and get a 429 with Retry-After. It is a token bucket kept
 * as one GCRA "theoretical arrival time" (allow_tat_ns) updated with
 * compare-and-swap: mmapable arrays cannot hold a bpf_spin_lock, and one
 * 64-bit CAS keeps the limit exact across CPUs where a per-CPU bucket would
 * let nr_cpus times the rate through. Rate and burst are node-wide
 * (struct fg_node_state). */
struct fg_tenant_state {
	char name[FG_NAME_LEN];
	char tier[FG_NAME_LEN];
	__u32 flags;              /* FG_TENANT_* */
	__u32 tier_rank;          /* 0 = lowest tier; see fg_node_state.overload_below */
	__u32 verdict;            /* enum fg_verdict, meaningful inside the window */
	__u32 deny_source;        /* enum fg_deny_source: who opened the window */
	__u64 deny_until_ns;      /* 0 = no window */
	__u64 allow_tat_ns;       /* allowance GCRA state (BPF-owned) */
	__u64 rst_tat_ns;         /* shed RST budget GCRA state (BPF-owned) */
	struct fg_tenant_quota quota;
};

enum fg_deny_source {
	FG_DENY_NONE = 0,
	FG_DENY_OPERATOR = 1,     /* fairgatectl tenant deny */
	FG_DENY_QUOTA = 2,        /* the agent's controller (bucket empty) */
};

/* Per-CPU, per-tenant (index = tenant id). Sum over CPUs to read. */
struct fg_tenant_counters {
	__u64 syn_passed;         /* judged SYNs let through (incl. allowance) */
	__u64 syn_delayed;        /* SYNs dropped (delay) */
	__u64 syn_shed;           /* SYNs answered with RST (shed or overload) */
	__u64 allowance_used;     /* SYNs let through a deny window by the allowance */
	__u64 overload_shed;      /* of syn_shed: shed because of node overload */
	__u64 steer_refused;      /* connections refused by steer (sk_lookup) */
	__u64 shed_dropped;       /* SYNs to shed dropped instead: the tenant's
				   * RST budget (agent.shed_rst_per_s) was spent */
};

/* The source index: src_learned and src_tenant compiled by fairgated into
 * open-addressing tables in one mmapable array (src_index), so that the
 * first SYN of a source is attributed with a few array loads instead of a
 * hash probe and an LPM walk (both kernel calls). It is a copy: the two
 * maps stay the truth, which bpftool shows and edits.
 *
 * Each half of src_index holds a learned table (FG_IDX_LEARNED_SLOTS,
 * addresses) and a static table (FG_IDX_STATIC_SLOTS, CIDRs keyed by
 * prefix length and masked address); a table uses its first mask + 1
 * slots, sized for a quarter full (half at the most: the maps' limits),
 * and is probed linearly. A key sits at most FG_IDX_PROBES (static:
 * FG_IDX_STATIC_PROBES) slots from its hash's slot, so a lookup that meets
 * an empty slot, or that many others, has missed. A build that cannot
 * place a key so draws another hash key, then spreads the table wider;
 * CIDRs that still do not fit are left to the trie (n_lens =
 * FG_IDX_LENS_TRIE). Static entries are probed once per prefix length
 * present, longest first (lens; more than FG_IDX_MAX_LENS lengths: the
 * static part is left to the LPM trie too). The reads are ordered for x86
 * (a compiler barrier and volatile loads), as gate's attribution cache is.
 *
 * The learned table has a shadow, src_index_fp: one 16-bit fingerprint of
 * the hash per slot (0 = empty), 32 to a cache line, so that a lookup of an
 * address never seen (every SYN of a forged flood) reads one small line
 * instead of a run of 24-byte slots; a slot is read only when its
 * fingerprint matches.
 *
 * A half counts only while valid, its seqlock (seq, odd while written) is
 * unchanged across the lookups, and it was read from the maps less than
 * FG_IDX_MAX_AGE_NS ago (built_ns): fairgated re-reads the maps every
 * FG_IDX_REBUILD_MS, so an edit behind its back (bpftool on the pins) shows
 * within that, and a dead fairgated's index stops counting by itself.
 * Anything else — a bulk change being rebuilt, a seqlock moved — and the
 * programs ask the maps, as they would without the index. */
#define FG_IDX_LEARNED_SLOTS (2u * FG_MAP_MAX_LEARNED) /* powers of two */
#define FG_IDX_STATIC_SLOTS  (2u * FG_MAP_MAX_STATIC)
#define FG_IDX_HALF_SLOTS    (FG_IDX_LEARNED_SLOTS + FG_IDX_STATIC_SLOTS)
#define FG_IDX_FP_WORDS      (FG_IDX_LEARNED_SLOTS / 4) /* per half */
#define FG_IDX_PROBES        32  /* learned table */
#define FG_IDX_STATIC_PROBES 8   /* static table: probed once per prefix length */
#define FG_IDX_MAX_LENS      12
#define FG_IDX_LENS_TRIE     0xff
#define FG_IDX_MAX_AGE_NS    (2000ull * 1000 * 1000)
#define FG_IDX_CLOCK_SLACK_NS (50ull * 1000 * 1000)
#define FG_IDX_REBUILD_MS    500

struct fg_src_index_slot {
	__u64 addr[2];            /* fg_src_key as two native loads (masked: static) */
	__u32 tag;                /* 0 = empty; learned: 1; static: 1 + prefixlen */
	__u32 answer;             /* fg_src_index_answer() | FG_IDX_SHARED */
};

/* An answer: the tenant id + 1 in the low FG_IDX_ID_BITS, the flags above
 * it. 24 bits, not 16: id 65535 + 1 is 1 << 16, which a 16-bit field would
 * read as the shared flag (and its id as -1). */
#define FG_IDX_ID_BITS 24
#define FG_IDX_ID_MASK ((1u << FG_IDX_ID_BITS) - 1)
#define FG_IDX_SHARED (1u << FG_IDX_ID_BITS)       /* learned, shared: skipped, like the map's */
#define FG_IDX_ANSWER (1u << (FG_IDX_ID_BITS + 1)) /* in every answer stored: none is 0,
						    * which a lookup returns for "not here" */
#define FG_IDX_NO_TENANT 0u       /* the id field of an answer naming no
				   * tenant (a map edited by hand) */

/* A slot's answer for a tenant id, and back: the id + 1 in the low bits;
 * an id out of range (or -1) is stored as FG_IDX_NO_TENANT and read as -1
 * (unattributed), as gate judges it when the maps name it. Reading is
 * branch-free, so the verifier walks one path through each reader. gate's
 * attribution cache stores its answers the same way. */
static inline __attribute__((always_inline)) __u32 fg_src_index_answer(__u32 tenant_id)
{
	return (tenant_id < FG_MAP_MAX_TENANTS ? tenant_id + 1 : FG_IDX_NO_TENANT) | FG_IDX_ANSWER;
}

static inline __attribute__((always_inline)) int fg_src_index_tenant(__u32 answer)
{
	return (int)(answer & FG_IDX_ID_MASK) - 1;
}

struct fg_src_index_head {
	__u32 seq;                /* odd while the half is written */
	__u32 valid;              /* 0: not a faithful copy (being rebuilt) */
	__u64 built_ns;           /* CLOCK_MONOTONIC when its maps were read */
	__u32 learned_mask;       /* slots used - 1 (a power of two - 1) */
	__u32 static_mask;
	__u64 hash_key[2];        /* fg_src_index_hash's, this half's */
	__u8 n_lens;              /* static prefix lengths, or FG_IDX_LENS_TRIE */
	__u8 lens[FG_IDX_MAX_LENS]; /* longest first, fg_lpm_key prefixlen */
	__u8 head_pad[3];
};

/* Node-wide settings (array of one, mmapable). */
struct fg_node_state {
	__u16 protected_ports[FG_MAX_PROTECTED_PORTS]; /* host order; 0 = unused */
	__u32 n_protected_ports;
	__u32 overload_below;     /* node overload: shed tiers with tier_rank <
				   * this (0, the zeroed default, = none) until
				   * overload_until_ns */
	__u64 allow_interval_ns;  /* 1e9 / deny_allowance_per_s; 0 = no allowance */
	__u32 allow_burst;        /* SYNs the allowance may pass at once */
	__u32 shed_sample_mask;   /* emit one shed event per (mask+1) per CPU/tenant */
	__u64 agent_started_ns;   /* CLOCK_MONOTONIC of the owning fairgated start */
	/* steer (sk_lookup). The agent's own upstream connections are never
	 * steered: those that arrive on loopback (so they were made in this
	 * namespace) and go to agent.engine (steer_engine_*) or come from a
	 * source port in [steer_exempt_lo, steer_exempt_hi] (0 = no range). */
	__u16 steer_exempt_lo;
	__u16 steer_exempt_hi;
	__u32 steer_flags;        /* FG_STEER_* */
	__u8 steer_engine_addr[16]; /* fg_src_key form */
	__u16 steer_engine_port;  /* host order; 0 = none */
	__u16 n_gate_ifindex;
	/* Interfaces gate is attached to: steer leaves the SYNs that came in
	 * through them alone (gate has judged them, allowance included). */
	__u32 gate_ifindex[FG_MAX_GATE_IFACES];
	/* gate caches what it attributed a source to (its own, unpinned
	 * src_cache); an entry counts only while its generation equals
	 * attr_gen. Userspace bumps attr_gen after every change to src_learned
	 * or src_tenant (kernel_maps.c does), so a cached answer never outlives
	 * the entries it came from. 0 = never set: nothing is cached. */
	__u32 attr_gen;
	__u32 attr_pad;
	__u64 src_hash_key[2];    /* random, [0] odd: see fg_src_cache_slot */
	/* The RST budget: a tenant's shed SYNs are answered with an RST at
	 * most once per rst_interval_ns (bursts of rst_burst), the rest are
	 * dropped, so a flood with forged sources cannot turn gate into a
	 * reflector and a flood costs what a delay costs. 0 = no budget. */
	__u64 rst_interval_ns;
	__u32 rst_burst;
	__u32 rst_pad;
	/* The source index (src_index): two halves, one read while fairgated
	 * rebuilds the other; see struct fg_src_index_head. */
	__u32 idx_active;         /* the half gate reads: 0 or 1 */
	__u32 idx_pad;
	struct fg_src_index_head idx[2];
	/* The node overload ends here (CLOCK_MONOTONIC) unless fairgated
	 * renews it, as it does every second while it lasts: an overload in
	 * force when the agent dies lapses on its own, like a deny window. */
	__u64 overload_until_ns;
};

enum fg_steer_flags {
	FG_STEER_ON = 1u << 0,    /* steering enabled (transparent mode) */
	FG_STEER_FAIL_CLOSED = 1u << 1, /* no agent listener: refuse (SK_DROP)
					 * instead of falling through to the engine */
};

/* Per-CPU node counters (index 0). */
struct fg_node_counters {
	__u64 syn_judged;         /* SYNs to protected ports */
	__u64 unattributed;       /* of those: no tenant (passed) */
	__u64 shared_source;      /* of those: learned source shared by tenants */
	__u64 not_judged;         /* malformed IP/TCP headers and fragments */
	__u64 rst_sent;
	__u64 rst_fallback_drop;  /* shed SYN whose RST could not be built: dropped */
	__u64 steered;            /* sk_lookup: handed to the agent */
	__u64 steer_exempt;       /* sk_lookup: agent's own upstream connection */
	__u64 steer_no_listener;  /* sk_lookup: no agent socket, fell through */
	__u64 attr_without_index; /* judged SYNs the source index could not
				   * answer (not valid, being written, too
				   * old): attributed by the cache or the maps */
};

/* Source keys: IPv6, with IPv4 as ::ffff:a.b.c.d (RFC 4291 mapped). */
struct fg_src_key {
	__u8 addr[16] __attribute__((aligned(4))); /* BPF writes it as 4 words */
};

/* LPM trie key: prefixlen counts bits of the mapped address, so an IPv4
 * /16 is stored as prefixlen 96 + 16. */
struct fg_lpm_key {
	__u32 prefixlen;
	__u8 addr[16];
};

struct fg_src_static {
	__u32 tenant_id;
};

enum fg_src_flags {
	FG_SRC_SHARED = 1u << 0,  /* seen with more than one tenant: not attributed */
};

struct fg_src_learned {
	__u32 tenant_id;
	__u32 flags;              /* FG_SRC_* */
	__u64 last_seen_ns;       /* CLOCK_MONOTONIC */
};

enum fg_shed_reason {
	FG_SHED_DELAY = 1,
	FG_SHED_RST = 2,
	FG_SHED_OVERLOAD = 3,
	FG_SHED_STEER = 4,
	FG_SHED_RST_BUDGET = 5,   /* shed, but dropped: RST budget spent */
};

/* Sampled shed events (ringbuf). */
struct fg_shed_event {
	__u64 ts_ns;
	__u32 tenant_id;
	__u32 reason;             /* enum fg_shed_reason */
	__u8 saddr[16];           /* fg_src_key form */
	__u16 sport;              /* host order */
	__u16 dport;
	__u32 count;              /* per-CPU sheds of this tenant so far */
};

/* The slot of gate's attribution cache for a source (fg_src_key as two
 * 64-bit words, which gate loads anyway to compare): the halves folded,
 * then multiply-shift with the node's random keys, so which sources share
 * a slot is not predictable from outside (a source that does share one
 * only costs lookups, never a wrong answer). Used by gate and by the tests
 * that aim two sources at one slot. */
#define FG_SRC_CACHE_BITS 16
#define FG_SRC_CACHE_SLOTS (1u << FG_SRC_CACHE_BITS)

static inline __attribute__((always_inline)) __u32
fg_src_cache_slot(const __u64 key[2], __u64 a0, __u64 a1)
{
	return (__u32)(((a0 ^ a1 ^ key[1]) * key[0]) >> (64 - FG_SRC_CACHE_BITS));
}

/* The index's hash: the key of the half (random, drawn afresh for every
 * build) folded into the address and mixed down with two multiplies, the
 * slot taken from the high half of the last product, so that every bit of
 * the address moves every bit of the slot (an IPv4 address sits in the top
 * half of a1; the slot is hash & mask), and which sources share a cluster
 * is unpredictable from outside and changes with every rebuild. tweak = 0
 * for learned addresses, 1 + prefixlen for masked static ones. */
static inline __attribute__((always_inline)) __u32
fg_src_index_hash(const __u64 key[2], __u64 a0, __u64 a1, __u32 tweak)
{
	__u64 h = (a0 ^ key[1]) * 0x9e3779b97f4a7c15ull;

	h ^= a1 ^ key[0] ^ tweak;
	h ^= h >> 32;
	h *= 0xbf58476d1ce4e5b9ull;
	return (__u32)(h >> 32);
}

/* A learned slot's fingerprint: the hash's high half, never 0. */
static inline __attribute__((always_inline)) __u16 fg_src_index_fp(__u32 hash)
{
	return (__u16)(hash >> 16) | 1;
}

/* The mask that keeps the first `bits` (0..64) bits of 8 network-order
 * bytes loaded as one native 64-bit word. */
static inline __attribute__((always_inline)) __u64 fg_prefix_mask64(__u32 bits)
{
	__u64 m = bits >= 64 ? ~0ull : bits ? ~0ull << (64 - bits) : 0;

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	m = __builtin_bswap64(m);
#endif
	return m;
}

#include "maps/fairgate_maps_layout.h"

#endif
