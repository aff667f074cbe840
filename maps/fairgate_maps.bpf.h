/* fairgate_maps.bpf.h — the map definitions, BPF side, and nothing else.
 * Every program that includes this declares the same maps pinned by name,
 * so gate and steer loaded from separate objects share one set of pins
 * under the pin dir. Each map is named by its FG_MAP_* macro
 * (fairgate_maps.h), the one spelling userspace opens it by. What the
 * programs do with the maps is in bpf/attribute.bpf.h. */
#ifndef FAIRGATE_MAPS_BPF_H
#define FAIRGATE_MAPS_BPF_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "maps/fairgate_maps.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FG_MAP_MAX_TENANTS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct fg_tenant_state);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} FG_MAP_TENANTS SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FG_MAP_MAX_TENANTS);
	__type(key, __u32);
	__type(value, struct fg_tenant_counters);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} FG_MAP_TENANT_STATS SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, FG_MAP_MAX_STATIC);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct fg_lpm_key);
	__type(value, struct fg_src_static);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} FG_MAP_SRC_TENANT SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FG_MAP_MAX_LEARNED);
	__type(key, struct fg_src_key);
	__type(value, struct fg_src_learned);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} FG_MAP_SRC_LEARNED SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct fg_node_state);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} FG_MAP_NODE SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fg_node_counters);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} FG_MAP_NODE_STATS SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, FG_SHED_RING_BYTES);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} FG_MAP_SHED_EVENTS SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * FG_IDX_HALF_SLOTS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct fg_src_index_slot);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} FG_MAP_SRC_INDEX SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * FG_IDX_FP_WORDS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} FG_MAP_SRC_INDEX_FP SEC(".maps");

#endif
