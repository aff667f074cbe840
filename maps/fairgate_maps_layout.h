/* fairgate_maps_layout.h — the ABI's layout, pinned: every struct that
 * crosses the kernel boundary (a map's key or value, a ring buffer record)
 * with its size and the offset of each field, and the names and limits the
 * two sides must agree on. Included at the end of fairgate_maps.h, so the
 * BPF programs and every userspace file that uses the ABI compile these
 * checks: a field moved by accident fails the build on both sides instead
 * of a node reusing a pinned map with the old layout (libbpf compares only
 * a value's size, and a reordering keeps it).
 *
 * A deliberate change (append a field; see fairgate_maps.h on --cleanup)
 * updates the numbers here in the same commit. */
#ifndef FAIRGATE_MAPS_LAYOUT_H
#define FAIRGATE_MAPS_LAYOUT_H

#define FG_ABI_SIZE(type, size) \
	_Static_assert(sizeof(type) == (size), #type ": size changed (ABI)")
#define FG_ABI_FIELD(type, field, offset) \
	_Static_assert(__builtin_offsetof(type, field) == (offset), #type "." #field " moved (ABI)")
#define FG_ABI_MAP_NAME(id) \
	_Static_assert(sizeof(FG_MAP_NAME(id)) <= 16, FG_MAP_NAME(id) ": longer than BPF_OBJ_NAME_LEN - 1")

FG_ABI_SIZE(struct fg_tenant_quota, 312);
FG_ABI_FIELD(struct fg_tenant_quota, bucket_units, 0);
FG_ABI_FIELD(struct fg_tenant_quota, rate_units_per_s, 8);
FG_ABI_FIELD(struct fg_tenant_quota, burst_units, 16);
FG_ABI_FIELD(struct fg_tenant_quota, reserved_units, 24);
FG_ABI_FIELD(struct fg_tenant_quota, kv_resident_tokens, 32);
FG_ABI_FIELD(struct fg_tenant_quota, kv_cap_tokens, 40);
FG_ABI_FIELD(struct fg_tenant_quota, inflight, 48);
FG_ABI_FIELD(struct fg_tenant_quota, queued, 52);
FG_ABI_FIELD(struct fg_tenant_quota, admitted, 56);
FG_ABI_FIELD(struct fg_tenant_quota, rejected, 64);
FG_ABI_FIELD(struct fg_tenant_quota, updated_ns, 72);
FG_ABI_FIELD(struct fg_tenant_quota, settled, 80);
FG_ABI_FIELD(struct fg_tenant_quota, written_off, 88);
FG_ABI_FIELD(struct fg_tenant_quota, long_context, 96);
FG_ABI_FIELD(struct fg_tenant_quota, timed_out, 104);
FG_ABI_FIELD(struct fg_tenant_quota, exact_counts, 112);
FG_ABI_FIELD(struct fg_tenant_quota, cut_off, 120);
FG_ABI_FIELD(struct fg_tenant_quota, usage_clamped, 128);
FG_ABI_FIELD(struct fg_tenant_quota, units_billed_milli, 136);
FG_ABI_FIELD(struct fg_tenant_quota, units_refunded_milli, 144);
FG_ABI_FIELD(struct fg_tenant_quota, units_written_off_milli, 152);
FG_ABI_FIELD(struct fg_tenant_quota, output_tokens_billed_milli, 160);
FG_ABI_FIELD(struct fg_tenant_quota, output_units_billed_milli, 168);
FG_ABI_FIELD(struct fg_tenant_quota, typical_cost_milli, 176);
FG_ABI_FIELD(struct fg_tenant_quota, outcomes, 184);

FG_ABI_SIZE(struct fg_tenant_state, 416);
FG_ABI_FIELD(struct fg_tenant_state, name, 0);
FG_ABI_FIELD(struct fg_tenant_state, tier, 32);
FG_ABI_FIELD(struct fg_tenant_state, flags, 64);
FG_ABI_FIELD(struct fg_tenant_state, tier_rank, 68);
FG_ABI_FIELD(struct fg_tenant_state, verdict, 72);
FG_ABI_FIELD(struct fg_tenant_state, deny_source, 76);
FG_ABI_FIELD(struct fg_tenant_state, deny_until_ns, 80);
FG_ABI_FIELD(struct fg_tenant_state, allow_tat_ns, 88);
FG_ABI_FIELD(struct fg_tenant_state, rst_tat_ns, 96);
FG_ABI_FIELD(struct fg_tenant_state, quota, 104);

FG_ABI_SIZE(struct fg_tenant_counters, 56);
FG_ABI_FIELD(struct fg_tenant_counters, syn_passed, 0);
FG_ABI_FIELD(struct fg_tenant_counters, syn_delayed, 8);
FG_ABI_FIELD(struct fg_tenant_counters, syn_shed, 16);
FG_ABI_FIELD(struct fg_tenant_counters, allowance_used, 24);
FG_ABI_FIELD(struct fg_tenant_counters, overload_shed, 32);
FG_ABI_FIELD(struct fg_tenant_counters, steer_refused, 40);
FG_ABI_FIELD(struct fg_tenant_counters, shed_dropped, 48);

FG_ABI_SIZE(struct fg_src_index_slot, 24);
FG_ABI_FIELD(struct fg_src_index_slot, addr, 0);
FG_ABI_FIELD(struct fg_src_index_slot, tag, 16);
FG_ABI_FIELD(struct fg_src_index_slot, answer, 20);

FG_ABI_SIZE(struct fg_src_index_head, 56);
FG_ABI_FIELD(struct fg_src_index_head, seq, 0);
FG_ABI_FIELD(struct fg_src_index_head, valid, 4);
FG_ABI_FIELD(struct fg_src_index_head, built_ns, 8);
FG_ABI_FIELD(struct fg_src_index_head, learned_mask, 16);
FG_ABI_FIELD(struct fg_src_index_head, static_mask, 20);
FG_ABI_FIELD(struct fg_src_index_head, hash_key, 24);
FG_ABI_FIELD(struct fg_src_index_head, n_lens, 40);
FG_ABI_FIELD(struct fg_src_index_head, lens, 41);
FG_ABI_FIELD(struct fg_src_index_head, head_pad, 53);

FG_ABI_SIZE(struct fg_node_state, 280);
FG_ABI_FIELD(struct fg_node_state, protected_ports, 0);
FG_ABI_FIELD(struct fg_node_state, n_protected_ports, 16);
FG_ABI_FIELD(struct fg_node_state, overload_below, 20);
FG_ABI_FIELD(struct fg_node_state, allow_interval_ns, 24);
FG_ABI_FIELD(struct fg_node_state, allow_burst, 32);
FG_ABI_FIELD(struct fg_node_state, shed_sample_mask, 36);
FG_ABI_FIELD(struct fg_node_state, agent_started_ns, 40);
FG_ABI_FIELD(struct fg_node_state, steer_exempt_lo, 48);
FG_ABI_FIELD(struct fg_node_state, steer_exempt_hi, 50);
FG_ABI_FIELD(struct fg_node_state, steer_flags, 52);
FG_ABI_FIELD(struct fg_node_state, steer_engine_addr, 56);
FG_ABI_FIELD(struct fg_node_state, steer_engine_port, 72);
FG_ABI_FIELD(struct fg_node_state, n_gate_ifindex, 74);
FG_ABI_FIELD(struct fg_node_state, gate_ifindex, 76);
FG_ABI_FIELD(struct fg_node_state, attr_gen, 108);
FG_ABI_FIELD(struct fg_node_state, attr_pad, 112);
FG_ABI_FIELD(struct fg_node_state, src_hash_key, 120);
FG_ABI_FIELD(struct fg_node_state, rst_interval_ns, 136);
FG_ABI_FIELD(struct fg_node_state, rst_burst, 144);
FG_ABI_FIELD(struct fg_node_state, rst_pad, 148);
FG_ABI_FIELD(struct fg_node_state, idx_active, 152);
FG_ABI_FIELD(struct fg_node_state, idx_pad, 156);
FG_ABI_FIELD(struct fg_node_state, idx, 160);
FG_ABI_FIELD(struct fg_node_state, overload_until_ns, 272);

FG_ABI_SIZE(struct fg_node_counters, 80);
FG_ABI_FIELD(struct fg_node_counters, syn_judged, 0);
FG_ABI_FIELD(struct fg_node_counters, unattributed, 8);
FG_ABI_FIELD(struct fg_node_counters, shared_source, 16);
FG_ABI_FIELD(struct fg_node_counters, not_judged, 24);
FG_ABI_FIELD(struct fg_node_counters, rst_sent, 32);
FG_ABI_FIELD(struct fg_node_counters, rst_fallback_drop, 40);
FG_ABI_FIELD(struct fg_node_counters, steered, 48);
FG_ABI_FIELD(struct fg_node_counters, steer_exempt, 56);
FG_ABI_FIELD(struct fg_node_counters, steer_no_listener, 64);
FG_ABI_FIELD(struct fg_node_counters, attr_without_index, 72);

FG_ABI_SIZE(struct fg_src_key, 16);
FG_ABI_FIELD(struct fg_src_key, addr, 0);

FG_ABI_SIZE(struct fg_lpm_key, 20);
FG_ABI_FIELD(struct fg_lpm_key, prefixlen, 0);
FG_ABI_FIELD(struct fg_lpm_key, addr, 4);

FG_ABI_SIZE(struct fg_src_static, 4);
FG_ABI_FIELD(struct fg_src_static, tenant_id, 0);

FG_ABI_SIZE(struct fg_src_learned, 16);
FG_ABI_FIELD(struct fg_src_learned, tenant_id, 0);
FG_ABI_FIELD(struct fg_src_learned, flags, 4);
FG_ABI_FIELD(struct fg_src_learned, last_seen_ns, 8);

FG_ABI_SIZE(struct fg_shed_event, 40);
FG_ABI_FIELD(struct fg_shed_event, ts_ns, 0);
FG_ABI_FIELD(struct fg_shed_event, tenant_id, 8);
FG_ABI_FIELD(struct fg_shed_event, reason, 12);
FG_ABI_FIELD(struct fg_shed_event, saddr, 16);
FG_ABI_FIELD(struct fg_shed_event, sport, 32);
FG_ABI_FIELD(struct fg_shed_event, dport, 34);
FG_ABI_FIELD(struct fg_shed_event, count, 36);

_Static_assert(_Alignof(struct fg_src_key) == 4, "fg_src_key: BPF writes it as four 32-bit words");
_Static_assert(_Alignof(struct fg_src_index_slot) == 8, "fg_src_index_slot: two 64-bit loads");

FG_ABI_MAP_NAME(FG_MAP_TENANTS);
FG_ABI_MAP_NAME(FG_MAP_TENANT_STATS);
FG_ABI_MAP_NAME(FG_MAP_SRC_TENANT);
FG_ABI_MAP_NAME(FG_MAP_SRC_LEARNED);
FG_ABI_MAP_NAME(FG_MAP_NODE);
FG_ABI_MAP_NAME(FG_MAP_NODE_STATS);
FG_ABI_MAP_NAME(FG_MAP_SHED_EVENTS);
FG_ABI_MAP_NAME(FG_MAP_SRC_INDEX);
FG_ABI_MAP_NAME(FG_MAP_SRC_INDEX_FP);
FG_ABI_MAP_NAME(FG_MAP_STEER_SOCK);

/* The index's answer holds a tenant id + 1 below its flags: the largest,
 * FG_MAP_MAX_TENANTS, must not reach the shared bit. */
_Static_assert(FG_MAP_MAX_TENANTS <= FG_IDX_ID_MASK, "tenant ids + 1 must fit the index's answer");
_Static_assert(FG_IDX_SHARED > FG_IDX_ID_MASK && FG_IDX_ANSWER > FG_IDX_ID_MASK &&
	       FG_IDX_SHARED != FG_IDX_ANSWER, "the index's flags sit above the id");
/* Tables are probed with `& mask`, the fingerprints four to a word. */
_Static_assert(!(FG_IDX_LEARNED_SLOTS & (FG_IDX_LEARNED_SLOTS - 1)), "learned: a power of two");
_Static_assert(!(FG_IDX_STATIC_SLOTS & (FG_IDX_STATIC_SLOTS - 1)), "static: a power of two");
_Static_assert(FG_IDX_LEARNED_SLOTS % 4 == 0, "four fingerprints a word");
_Static_assert(FG_IDX_MAX_LENS < FG_IDX_LENS_TRIE, "n_lens: a count or FG_IDX_LENS_TRIE");
_Static_assert(sizeof(((struct fg_src_index_head *)0)->lens) == FG_IDX_MAX_LENS, "lens[]");
/* The kernel's ring buffer: a power-of-two number of pages. */
_Static_assert(FG_SHED_RING_BYTES % 4096 == 0 &&
	       !(FG_SHED_RING_BYTES & (FG_SHED_RING_BYTES - 1)), "shed ring: power-of-two pages");

#endif
