/* kernel_maps.h — userspace access to the pinned fairgate maps, without
 * owning any program: used by fairgated (kernel.c), fairgatectl (tenant
 * list/show read the pins directly) and the BPF tests (maps of a skeleton
 * loaded without pins).
 *
 * The tenants and node arrays are mmapped (BPF_F_MMAPABLE), so publishing
 * a tenant's state is a few stores, not a syscall. */
#ifndef FAIRGATE_KERNEL_MAPS_H
#define FAIRGATE_KERNEL_MAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include "maps/fairgate_maps.h"
#include "policy/policy.h"

struct fg_src_index_rt;

struct fg_maps {
	int tenants_fd;
	int tenant_stats_fd;
	int src_tenant_fd;
	int src_learned_fd;
	int node_fd;
	int node_stats_fd;
	int shed_events_fd;
	struct fg_tenant_state *tenants; /* mmap, FG_MAP_MAX_TENANTS entries */
	size_t tenants_len;
	struct fg_node_state *node;      /* mmap, one entry */
	size_t node_len;
	int src_index_fd;                /* -1 when opened from pins (fairgatectl) */
	struct fg_src_index_slot *src_index; /* mmap, 2 x FG_IDX_HALF_SLOTS */
	size_t src_index_len;
	int src_index_fp_fd;
	uint64_t *src_index_fp;          /* mmap, 2 x FG_IDX_FP_WORDS */
	size_t src_index_fp_len;
	struct fg_src_index_rt *idx_rt;  /* maps/src_index.c's, once used */
	int ncpus;
	bool own_fds;                    /* close the fds in fg_maps_close */
};

/* Open the pins under pin_dir. Returns 0, or -1 with one line in err. */
int fg_maps_open_pinned(struct fg_maps *m, const char *pin_dir, char *err, size_t errlen);
/* The maps of a loaded BPF object (a skeleton's obj), found by name; the
 * fds stay the object's, only the mmaps are ours. */
struct bpf_object;
int fg_maps_from_object(struct fg_maps *m, const struct bpf_object *obj, char *err, size_t errlen);
void fg_maps_close(struct fg_maps *m);

/* Tenant id by name among active slots; -1 if none. */
int fg_maps_tenant_id(const struct fg_maps *m, const char *name);

/* Fill tenants, static sources and node settings from a policy. State that
 * belongs to a tenant (deny window, counters, learned sources) follows the
 * tenant by name to its new id; slots no tenant uses any more are cleared. */
int fg_maps_apply_policy(struct fg_maps *m, const struct fg_policy *p, char *err, size_t errlen);

int fg_maps_set_deny(struct fg_maps *m, uint32_t id, uint64_t until_ns, int verdict, int source);
/* Node overload: gate sheds the new connections of tiers ranked <= rank
 * (-1: none) until until_ns (CLOCK_MONOTONIC), so the caller renews it
 * while the overload lasts; FG_OVERLOAD_LEASE_NS is how long a renewal
 * holds when nobody renews it (the agent died). */
#define FG_OVERLOAD_LEASE_NS (3ull * 1000000000ull)
int fg_maps_set_overload_rank(struct fg_maps *m, int rank, uint64_t until_ns);

/* Learn addr → tenant; marks the entry shared if it already names another
 * tenant. Returns 1 if the entry is (now) shared, 0 if not, -1 on error.
 * A full src_learned forgets its least recently seen eighth first. */
int fg_maps_learn_source(struct fg_maps *m, const struct fg_src_key *k, uint32_t tenant_id,
			 uint64_t now_ns);
/* Call after changing src_learned or src_tenant by any other means: gate's
 * cached attributions from before stop counting (node.attr_gen), and so
 * does the source index until it is rebuilt. Every fg_maps_* function that
 * changes them calls it itself. */
void fg_maps_sources_changed(struct fg_maps *m);
/* All of src_learned (batch reads); *keys and *vals are malloc'd. */
int fg_maps_read_learned(const struct fg_maps *m, struct fg_src_key **keys,
			 struct fg_src_learned **vals, uint32_t *n);

/* The published quota state is written by fairgated while fairgatectl
 * reads it from the pin (see fg_tenant_quota.updated_ns): a publish goes
 * begin, field stores, end; a reader takes a snapshot, consistent unless
 * the writer kept it busy for every one of many tries (false). */
uint64_t fg_quota_write_begin(struct fg_tenant_quota *q);
void fg_quota_write_end(struct fg_tenant_quota *q, uint64_t prev, uint64_t now_ns);
bool fg_quota_snapshot(const struct fg_tenant_quota *q, struct fg_tenant_quota *out);

/* Sum the per-CPU counters. */
int fg_maps_tenant_counters(const struct fg_maps *m, uint32_t id, struct fg_tenant_counters *out);
int fg_maps_node_counters(const struct fg_maps *m, struct fg_node_counters *out);

/* Addresses in the maps' form (IPv4 as ::ffff:a.b.c.d). */
int fg_src_key_from_sockaddr(const struct sockaddr *sa, struct fg_src_key *k);
int fg_src_key_parse(const char *text, struct fg_src_key *k);
void fg_src_key_format(const struct fg_src_key *k, char *buf, size_t len);
/* A policy CIDR as an LPM key. */
void fg_lpm_key_from_cidr(const struct fg_cidr *c, struct fg_lpm_key *k);

const char *fg_verdict_name(int verdict);
int fg_tier_rank(const struct fg_policy *p, uint32_t tier);

#endif
