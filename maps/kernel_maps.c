/* kernel_maps.c — the pinned maps seen from userspace: open, mmap, fill
 * from a policy, deny windows, learned sources, counters. No program
 * loading here (kernel.c owns that), so fairgatectl and the tests use the
 * same code fairgated does. */
#include "maps/kernel_maps.h"
#include "maps/src_index.h"
#include "policy/overload.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#define SHED_SAMPLE_MASK_DEFAULT 63

static size_t array_mmap_len(size_t value_size, size_t entries)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t len = ((value_size + 7) & ~(size_t)7) * entries;

	return (len + page - 1) & ~(page - 1);
}

/* Check a map has the shape this build expects: an old pin from another
 * fairgate version must not be read with the wrong struct. */
static int check_map(int fd, const char *name, uint32_t type, uint32_t key_size,
		     uint32_t value_size, char *err, size_t errlen)
{
	struct bpf_map_info info = { 0 };
	uint32_t len = sizeof(info);

	if (bpf_obj_get_info_by_fd(fd, &info, &len)) {
		snprintf(err, errlen, "map %s: %s", name, strerror(errno));
		return -1;
	}
	if (info.type != type || info.key_size != key_size ||
	    (value_size && info.value_size != value_size)) {
		snprintf(err, errlen,
			 "map %s has another layout (value %u bytes, want %u): pinned by a "
			 "different fairgate version; restart fairgated with --cleanup once",
			 name, info.value_size, value_size);
		return -1;
	}
	return 0;
}

/* An mmapable array map mapped read-write; NULL with err on failure. */
static void *mmap_array(int fd, const char *name, size_t value_size, size_t entries, size_t *len,
			char *err, size_t errlen)
{
	void *p;

	*len = array_mmap_len(value_size, entries);
	p = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		snprintf(err, errlen, "mmap of map %s: %s", name, strerror(errno));
		return NULL;
	}
	return p;
}

static int map_mmaps(struct fg_maps *m, char *err, size_t errlen)
{
	if (check_map(m->tenants_fd, FG_MAP_NAME(FG_MAP_TENANTS), BPF_MAP_TYPE_ARRAY, 4,
		      sizeof(struct fg_tenant_state), err, errlen) ||
	    check_map(m->node_fd, FG_MAP_NAME(FG_MAP_NODE), BPF_MAP_TYPE_ARRAY, 4,
		      sizeof(struct fg_node_state), err, errlen) ||
	    check_map(m->tenant_stats_fd, FG_MAP_NAME(FG_MAP_TENANT_STATS), BPF_MAP_TYPE_PERCPU_ARRAY, 4,
		      sizeof(struct fg_tenant_counters), err, errlen) ||
	    check_map(m->node_stats_fd, FG_MAP_NAME(FG_MAP_NODE_STATS), BPF_MAP_TYPE_PERCPU_ARRAY, 4,
		      sizeof(struct fg_node_counters), err, errlen) ||
	    check_map(m->src_tenant_fd, FG_MAP_NAME(FG_MAP_SRC_TENANT), BPF_MAP_TYPE_LPM_TRIE,
		      sizeof(struct fg_lpm_key), sizeof(struct fg_src_static), err, errlen) ||
	    check_map(m->src_learned_fd, FG_MAP_NAME(FG_MAP_SRC_LEARNED), BPF_MAP_TYPE_HASH,
		      sizeof(struct fg_src_key), sizeof(struct fg_src_learned), err, errlen))
		return -1;

	m->ncpus = libbpf_num_possible_cpus();
	if (m->ncpus <= 0) {
		snprintf(err, errlen, "cannot count possible CPUs");
		return -1;
	}
	m->tenants = mmap_array(m->tenants_fd, FG_MAP_NAME(FG_MAP_TENANTS), sizeof(struct fg_tenant_state),
				FG_MAP_MAX_TENANTS, &m->tenants_len, err, errlen);
	if (!m->tenants)
		return -1;
	m->node = mmap_array(m->node_fd, FG_MAP_NAME(FG_MAP_NODE), sizeof(struct fg_node_state), 1,
			     &m->node_len, err, errlen);
	return m->node ? 0 : -1;
}

/* One mmapable array of the object's, mapped; NULL with err on failure. */
static void *map_object_array(const struct bpf_object *obj, const char *name, size_t value_size,
			      size_t entries, int *fd, size_t *len, char *err, size_t errlen)
{
	const struct bpf_map *map = bpf_object__find_map_by_name(obj, name);

	*fd = map ? bpf_map__fd(map) : -1;
	if (*fd < 0) {
		snprintf(err, errlen, "the BPF object has no loaded map %s", name);
		return NULL;
	}
	if (check_map(*fd, name, BPF_MAP_TYPE_ARRAY, 4, (uint32_t)value_size, err, errlen))
		return NULL;
	return mmap_array(*fd, name, value_size, entries, len, err, errlen);
}

/* The source index is the object's: only the programs' owner keeps it. */
static int map_src_index(struct fg_maps *m, const struct bpf_object *obj, char *err, size_t errlen)
{
	m->src_index = map_object_array(obj, FG_MAP_NAME(FG_MAP_SRC_INDEX),
					sizeof(struct fg_src_index_slot), 2 * FG_IDX_HALF_SLOTS, &m->src_index_fd,
					&m->src_index_len, err, errlen);
	if (!m->src_index)
		return -1;
	m->src_index_fp = map_object_array(obj, FG_MAP_NAME(FG_MAP_SRC_INDEX_FP), sizeof(uint64_t),
					   2 * FG_IDX_FP_WORDS, &m->src_index_fp_fd,
					   &m->src_index_fp_len, err, errlen);
	return m->src_index_fp ? 0 : -1;
}

static void maps_reset(struct fg_maps *m)
{
	memset(m, 0, sizeof(*m));
	m->tenants_fd = m->tenant_stats_fd = m->src_tenant_fd = m->src_learned_fd = -1;
	m->node_fd = m->node_stats_fd = m->shed_events_fd = m->src_index_fd = -1;
	m->src_index_fp_fd = -1;
}

/* Each map by its name (its pin's, and its name in a BPF object) and the
 * field its fd goes in. */
struct map_slot {
	const char *name;
	int *fd;
};
#define MAP_SLOTS(m) { \
	{ FG_MAP_NAME(FG_MAP_TENANTS), &(m)->tenants_fd }, \
	{ FG_MAP_NAME(FG_MAP_TENANT_STATS), &(m)->tenant_stats_fd }, \
	{ FG_MAP_NAME(FG_MAP_SRC_TENANT), &(m)->src_tenant_fd }, \
	{ FG_MAP_NAME(FG_MAP_SRC_LEARNED), &(m)->src_learned_fd }, \
	{ FG_MAP_NAME(FG_MAP_NODE), &(m)->node_fd }, \
	{ FG_MAP_NAME(FG_MAP_NODE_STATS), &(m)->node_stats_fd }, \
	{ FG_MAP_NAME(FG_MAP_SHED_EVENTS), &(m)->shed_events_fd }, \
}

int fg_maps_open_pinned(struct fg_maps *m, const char *pin_dir, char *err, size_t errlen)
{
	struct map_slot pins[] = MAP_SLOTS(m);
	char path[PATH_MAX];

	maps_reset(m);
	m->own_fds = true;
	for (size_t i = 0; i < sizeof(pins) / sizeof(pins[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", pin_dir, pins[i].name);
		*pins[i].fd = bpf_obj_get(path);
		if (*pins[i].fd < 0) {
			int e = errno;

			if (e == ENOENT)
				snprintf(err, errlen,
					 "no fairgate maps at %s (fairgated has not run on this "
					 "node, or ran with --cleanup)", pin_dir);
			else if (e == EPERM || e == EACCES)
				snprintf(err, errlen, "%s: %s (reading the maps needs root or CAP_BPF)",
					 path, strerror(e));
			else
				snprintf(err, errlen, "%s: %s", path, strerror(e));
			fg_maps_close(m);
			return -1;
		}
	}
	if (map_mmaps(m, err, errlen)) {
		fg_maps_close(m);
		return -1;
	}
	return 0;
}

int fg_maps_from_object(struct fg_maps *m, const struct bpf_object *obj, char *err, size_t errlen)
{
	maps_reset(m);
	struct map_slot slots[] = MAP_SLOTS(m);

	for (size_t i = 0; i < sizeof(slots) / sizeof(slots[0]); i++) {
		const struct bpf_map *map = bpf_object__find_map_by_name(obj, slots[i].name);

		*slots[i].fd = map ? bpf_map__fd(map) : -1;
		if (*slots[i].fd < 0) {
			snprintf(err, errlen, "the BPF object has no loaded map %s", slots[i].name);
			fg_maps_close(m);
			return -1;
		}
	}
	if (map_mmaps(m, err, errlen) || map_src_index(m, obj, err, errlen)) {
		fg_maps_close(m);
		return -1;
	}
	return 0;
}

void fg_maps_close(struct fg_maps *m)
{
	fg_src_index_stop(m);
	if (m->src_index)
		munmap(m->src_index, m->src_index_len);
	if (m->src_index_fp)
		munmap(m->src_index_fp, m->src_index_fp_len);
	if (m->tenants)
		munmap(m->tenants, m->tenants_len);
	if (m->node)
		munmap(m->node, m->node_len);
	if (m->own_fds) {
		int fds[] = { m->tenants_fd, m->tenant_stats_fd, m->src_tenant_fd, m->src_learned_fd,
			      m->node_fd, m->node_stats_fd, m->shed_events_fd };
		for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
			if (fds[i] >= 0)
				close(fds[i]);
	}
	maps_reset(m);
}

int fg_maps_tenant_id(const struct fg_maps *m, const char *name)
{
	for (int i = 0; i < FG_MAP_MAX_TENANTS; i++) {
		const struct fg_tenant_state *t = &m->tenants[i];

		if ((t->flags & FG_TENANT_ACTIVE) && !strncmp(t->name, name, FG_NAME_LEN))
			return i;
	}
	return -1;
}

/* The ranking rule lives in policy/overload.c, where the shedding level is
 * chosen: the kernel must rank tiers exactly as the level assumes. */
int fg_tier_rank(const struct fg_policy *p, uint32_t tier)
{
	int ranks[FG_MAX_TIERS];

	if (tier >= p->n_tiers)
		return 0;
	fg_tier_ranks(p, ranks);
	return ranks[tier];
}

const char *fg_verdict_name(int verdict)
{
	switch (verdict) {
	case FG_VERDICT_ALLOW: return "allow";
	case FG_VERDICT_DELAY: return "delay";
	case FG_VERDICT_SHED: return "shed";
	default: return "unknown";
	}
}

/* ---- addresses ---- */

int fg_src_key_from_sockaddr(const struct sockaddr *sa, struct fg_src_key *k)
{
	memset(k, 0, sizeof(*k));
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;

		k->addr[10] = k->addr[11] = 0xff;
		memcpy(&k->addr[12], &in->sin_addr, 4);
		return 0;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;

		memcpy(k->addr, &in6->sin6_addr, 16);
		return 0;
	}
	errno = EAFNOSUPPORT;
	return -1;
}

int fg_src_key_parse(const char *text, struct fg_src_key *k)
{
	struct in_addr a4;

	memset(k, 0, sizeof(*k));
	if (inet_pton(AF_INET, text, &a4) == 1) {
		k->addr[10] = k->addr[11] = 0xff;
		memcpy(&k->addr[12], &a4, 4);
		return 0;
	}
	if (inet_pton(AF_INET6, text, k->addr) == 1)
		return 0;
	return -1;
}

void fg_src_key_format(const struct fg_src_key *k, char *buf, size_t len)
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	if (!memcmp(k->addr, mapped, sizeof(mapped)))
		inet_ntop(AF_INET, &k->addr[12], buf, (socklen_t)len);
	else
		inet_ntop(AF_INET6, k->addr, buf, (socklen_t)len);
}

void fg_lpm_key_from_cidr(const struct fg_cidr *c, struct fg_lpm_key *k)
{
	memset(k, 0, sizeof(*k));
	if (c->family == AF_INET) {
		k->prefixlen = 96u + (c->prefixlen > 32 ? 32 : c->prefixlen);
		k->addr[10] = k->addr[11] = 0xff;
		memcpy(&k->addr[12], c->addr, 4);
	} else {
		k->prefixlen = c->prefixlen > 128 ? 128 : c->prefixlen;
		memcpy(k->addr, c->addr, 16);
	}
	/* Host bits set in the policy ("10.1.2.3/16") must not make the key
	 * differ from the network's, or an update would add a second entry. */
	for (uint32_t bit = k->prefixlen; bit < 128; bit++)
		k->addr[bit / 8] &= (uint8_t)~(0x80u >> (bit % 8));
}

/* ---- the published quota: a seqlock on updated_ns ---- */

uint64_t fg_quota_write_begin(struct fg_tenant_quota *q)
{
	uint64_t prev = __atomic_load_n(&q->updated_ns, __ATOMIC_RELAXED);

	__atomic_store_n(&q->updated_ns, FG_QUOTA_WRITING, __ATOMIC_RELAXED);
	/* the marker is visible before any field store that follows */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	return prev == FG_QUOTA_WRITING ? 0 : prev;
}

void fg_quota_write_end(struct fg_tenant_quota *q, uint64_t prev, uint64_t now_ns)
{
	/* strictly increasing, so two publishes never look like one */
	if (now_ns <= prev)
		now_ns = prev + 1;
	if (now_ns == FG_QUOTA_WRITING)
		now_ns = 1;
	__atomic_store_n(&q->updated_ns, now_ns, __ATOMIC_RELEASE);
}

bool fg_quota_snapshot(const struct fg_tenant_quota *q, struct fg_tenant_quota *out)
{
	for (int i = 0; i < 100000; i++) {
		uint64_t before = __atomic_load_n(&q->updated_ns, __ATOMIC_ACQUIRE);

		if (before == FG_QUOTA_WRITING)
			continue;
		/* field by field through volatile: the writer may be storing */
		for (size_t k = 0; k < sizeof(*out); k++)
			((unsigned char *)out)[k] = ((const volatile unsigned char *)q)[k];
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&q->updated_ns, __ATOMIC_RELAXED) == before) {
			out->updated_ns = before;
			return true;
		}
	}
	memcpy(out, q, sizeof(*out));
	return false;
}

/* ---- deny windows, overload, learning ---- */

int fg_maps_set_deny(struct fg_maps *m, uint32_t id, uint64_t until_ns, int verdict, int source)
{
	struct fg_tenant_state *t;

	if (id >= FG_MAP_MAX_TENANTS || !m->tenants) {
		errno = ERANGE;
		return -1;
	}
	t = &m->tenants[id];
	if (verdict != FG_VERDICT_DELAY && verdict != FG_VERDICT_SHED)
		until_ns = 0;
	if (!until_ns) {
		/* Close the window first: a reader seeing until 0 ignores verdict. */
		__atomic_store_n(&t->deny_until_ns, 0, __ATOMIC_RELEASE);
		__atomic_store_n(&t->verdict, FG_VERDICT_ALLOW, __ATOMIC_RELAXED);
		__atomic_store_n(&t->deny_source, FG_DENY_NONE, __ATOMIC_RELAXED);
		return 0;
	}
	__atomic_store_n(&t->verdict, (uint32_t)verdict, __ATOMIC_RELAXED);
	__atomic_store_n(&t->deny_source, (uint32_t)source, __ATOMIC_RELAXED);
	__atomic_store_n(&t->deny_until_ns, until_ns, __ATOMIC_RELEASE);
	return 0;
}

int fg_maps_set_overload_rank(struct fg_maps *m, int rank, uint64_t until_ns)
{
	if (!m->node)
		return -1;
	/* the end first: a rank seen is never older than its end */
	__atomic_store_n(&m->node->overload_until_ns, rank < 0 ? 0 : until_ns, __ATOMIC_RELEASE);
	__atomic_store_n(&m->node->overload_below, rank < 0 ? 0u : (uint32_t)rank + 1,
			 __ATOMIC_RELEASE);
	return 0;
}

static void bump_attr_gen(struct fg_maps *m)
{
	if (!m->node)
		return;
	/* 0 means "cache nothing"; wrapping through it only costs lookups. */
	if (!__atomic_add_fetch(&m->node->attr_gen, 1, __ATOMIC_SEQ_CST))
		__atomic_store_n(&m->node->attr_gen, 1, __ATOMIC_SEQ_CST);
}

void fg_maps_sources_changed(struct fg_maps *m)
{
	fg_src_index_invalidate(m);
	bump_attr_gen(m);
}

struct learned_age {
	uint64_t last_seen_ns;
	uint32_t index;
};

static int cmp_age(const void *a, const void *b)
{
	uint64_t x = ((const struct learned_age *)a)->last_seen_ns;
	uint64_t y = ((const struct learned_age *)b)->last_seen_ns;

	return x < y ? -1 : x > y;
}

/* src_learned is full: forget the least recently seen eighth. (A plain
 * hash, not an LRU one, so that only this file ever removes an entry and
 * can tell gate's attribution cache and source index about it.) */
static int evict_learned(struct fg_maps *m)
{
	struct fg_src_key *keys = NULL;
	struct fg_src_learned *vals = NULL;
	struct learned_age *age = NULL;
	uint32_t n, victims;
	int rc = -1;

	if (fg_maps_read_learned(m, &keys, &vals, &n) || !(age = calloc(n + 1, sizeof(*age))))
		goto out;
	for (uint32_t i = 0; i < n; i++)
		age[i] = (struct learned_age){ vals[i].last_seen_ns, i };
	qsort(age, n, sizeof(*age), cmp_age);
	victims = n / 8 ? n / 8 : n;
	/* before the deletions too: nothing may answer from the old set
	 * while they run */
	fg_maps_sources_changed(m);
	for (uint32_t i = 0; i < victims; i++)
		bpf_map_delete_elem(m->src_learned_fd, &keys[age[i].index]);
	fg_maps_sources_changed(m);
	rc = 0;
out:
	free(keys);
	free(vals);
	free(age);
	return rc;
}

int fg_maps_learn_source(struct fg_maps *m, const struct fg_src_key *k, uint32_t tenant_id,
			 uint64_t now_ns)
{
	struct fg_src_learned v = { 0 };
	bool known = !bpf_map_lookup_elem(m->src_learned_fd, k, &v), changed = !known;

	if (!known) {
		v.tenant_id = tenant_id;
		v.flags = 0;
	} else if (v.tenant_id != tenant_id && !(v.flags & FG_SRC_SHARED)) {
		v.flags |= FG_SRC_SHARED;
		changed = true;
	}
	v.last_seen_ns = now_ns;
	if (bpf_map_update_elem(m->src_learned_fd, k, &v, BPF_ANY)) {
		if (errno != E2BIG || known || evict_learned(m) ||
		    bpf_map_update_elem(m->src_learned_fd, k, &v, BPF_ANY))
			return -1;
	}
	/* Refreshing last_seen of an unchanged entry leaves gate's cached
	 * answers valid; anything else invalidates them, and goes into the
	 * source index as it is (the index stays valid). */
	if (changed) {
		fg_src_index_learned(m, k, &v);
		bump_attr_gen(m);
	}
	return (v.flags & FG_SRC_SHARED) ? 1 : 0;
}

/* ---- counters ---- */

static int sum_percpu(int fd, uint32_t key, int ncpus, size_t nfields, uint64_t *out)
{
	size_t stride = (nfields * sizeof(uint64_t) + 7) & ~(size_t)7;
	uint8_t *buf = calloc((size_t)ncpus, stride);

	if (!buf)
		return -1;
	memset(out, 0, nfields * sizeof(uint64_t));
	if (bpf_map_lookup_elem(fd, &key, buf)) {
		free(buf);
		return -1;
	}
	for (int c = 0; c < ncpus; c++) {
		const uint64_t *v = (const uint64_t *)(buf + (size_t)c * stride);

		for (size_t f = 0; f < nfields; f++)
			out[f] += v[f];
	}
	free(buf);
	return 0;
}

int fg_maps_tenant_counters(const struct fg_maps *m, uint32_t id, struct fg_tenant_counters *out)
{
	return sum_percpu(m->tenant_stats_fd, id, m->ncpus, sizeof(*out) / sizeof(uint64_t),
			  (uint64_t *)out);
}

int fg_maps_node_counters(const struct fg_maps *m, struct fg_node_counters *out)
{
	return sum_percpu(m->node_stats_fd, 0, m->ncpus, sizeof(*out) / sizeof(uint64_t),
			  (uint64_t *)out);
}

static int zero_counters(struct fg_maps *m, uint32_t id)
{
	size_t stride = (sizeof(struct fg_tenant_counters) + 7) & ~(size_t)7;
	uint8_t *zero = calloc((size_t)m->ncpus, stride);
	int rc = zero ? bpf_map_update_elem(m->tenant_stats_fd, &id, zero, BPF_ANY) : -1;

	free(zero);
	return rc;
}

/* ---- policy ---- */

static void fill_tenant(struct fg_tenant_state *t, const struct fg_policy *p,
			const struct fg_tenant *pt)
{
	const struct fg_tier *tier = pt->tier < p->n_tiers ? &p->tiers[pt->tier] : NULL;

	memset(t->name, 0, sizeof(t->name));
	memset(t->tier, 0, sizeof(t->tier));
	snprintf(t->name, sizeof(t->name), "%s", pt->name);
	if (tier)
		snprintf(t->tier, sizeof(t->tier), "%s", tier->name);
	t->tier_rank = (uint32_t)fg_tier_rank(p, pt->tier);
	/* A fairgated that died inside a publish left the seqlock held: its
	 * figures are not to be trusted, start over from the policy's. */
	if (t->quota.updated_ns == FG_QUOTA_WRITING)
		__atomic_store_n(&t->quota.updated_ns, 0, __ATOMIC_RELEASE);
	if (!t->quota.updated_ns) {
		/* Never published: show the policy's figures, bucket full. */
		t->quota.rate_units_per_s = (uint64_t)llround(pt->units_per_s);
		t->quota.burst_units = (uint64_t)llround(pt->units_per_s * pt->burst_s);
		t->quota.bucket_units = (int64_t)t->quota.burst_units;
		t->quota.kv_cap_tokens = tier ? tier->kv_cap_tokens : 0;
	} else {
		uint64_t prev = fg_quota_write_begin(&t->quota);

		t->quota.rate_units_per_s = (uint64_t)llround(pt->units_per_s);
		fg_quota_write_end(&t->quota, prev, prev + 1);
	}
	__atomic_store_n(&t->flags, FG_TENANT_ACTIVE, __ATOMIC_RELEASE);
}

/* A per-second rate as gate's GCRA sees it: one per interval, bursts of
 * one second's worth (at least one); rate 0 gives 0/0, which gate reads as
 * "none" (allowance) or "no limit" (RST budget). */
static void gcra_from_rate(double rate, __u64 *interval_ns, __u32 *burst)
{
	if (rate > 0 && isfinite(rate)) {
		*interval_ns = (uint64_t)(1e9 / rate);
		*burst = rate < 1 ? 1 : (uint32_t)ceil(rate);
	} else {
		*interval_ns = 0;
		*burst = 0;
	}
}

static int apply_node(struct fg_maps *m, const struct fg_policy *p)
{
	struct fg_node_state *n = m->node;
	uint32_t np = p->agent.n_protected_ports;

	if (np > FG_MAX_PROTECTED_PORTS)
		np = FG_MAX_PROTECTED_PORTS;
	/* Ports: grow n last and shrink it first, so the program never reads
	 * a slot that is being rewritten as protected. */
	__atomic_store_n(&n->n_protected_ports, 0, __ATOMIC_RELEASE);
	for (uint32_t i = 0; i < FG_MAX_PROTECTED_PORTS; i++)
		n->protected_ports[i] = i < np ? p->agent.protected_ports[i] : 0;
	__atomic_store_n(&n->n_protected_ports, np, __ATOMIC_RELEASE);

	gcra_from_rate(p->agent.deny_allowance_per_s, &n->allow_interval_ns, &n->allow_burst);
	gcra_from_rate(p->agent.shed_rst_per_s, &n->rst_interval_ns, &n->rst_burst);
	if (!n->shed_sample_mask)
		n->shed_sample_mask = SHED_SAMPLE_MASK_DEFAULT;
	if (!(n->src_hash_key[0] | n->src_hash_key[1])) {
		uint64_t key[2];

		if (getrandom(key, sizeof(key), 0) != (ssize_t)sizeof(key))
			return -1;
		/* An odd multiplier; written before gate may use it (attr_gen
		 * is bumped after the policy is in). */
		n->src_hash_key[0] = key[0] | 1;
		n->src_hash_key[1] = key[1];
	}
	return 0;
}

/* Every CIDR a policy can list has room in the trie. */
_Static_assert(FG_MAX_POLICY_SOURCES <= FG_MAP_MAX_STATIC, "src_tenant too small");

/* One source the policy lists, and the tenant it names. */
struct listed_source {
	struct fg_lpm_key key;
	uint32_t owner;
};

static int cmp_listed_source(const void *a, const void *b)
{
	return memcmp(&((const struct listed_source *)a)->key, &((const struct listed_source *)b)->key,
		      sizeof(struct fg_lpm_key));
}

/* want[*i..n) into the trie, *i advancing: 0 all in, 1 the trie is full
 * (with until_full; *i is the first not added), -1 with err. */
static int add_static_sources(struct fg_maps *m, const struct fg_policy *p,
			      const struct listed_source *want, size_t n, size_t *i,
			      bool until_full, char *err, size_t errlen)
{
	struct fg_src_static v;

	for (; *i < n; (*i)++) {
		v.tenant_id = want[*i].owner;
		if (!bpf_map_update_elem(m->src_tenant_fd, &want[*i].key, &v, BPF_ANY))
			continue;
		if (until_full && errno == ENOSPC)
			return 1;
		snprintf(err, errlen, "adding source of tenant %s to %s: %s",
			 p->tenants[want[*i].owner].name, FG_MAP_NAME(FG_MAP_SRC_TENANT), strerror(errno));
		return -1;
	}
	return 0;
}

static int apply_static_sources(struct fg_maps *m, const struct fg_policy *p, char *err,
				size_t errlen)
{
	struct fg_lpm_key key, next;
	size_t n = 0, cap = 0;
	struct listed_source *want = NULL;
	struct fg_lpm_key *stale = NULL;
	size_t n_stale = 0;
	int rc = -1;

	for (uint32_t i = 0; i < p->n_tenants; i++)
		cap += p->tenants[i].n_sources;
	if (cap) {
		want = calloc(cap, sizeof(*want));
		if (!want) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
	}
	for (uint32_t i = 0; i < p->n_tenants; i++) {
		for (uint32_t s = 0; s < p->tenants[i].n_sources; s++) {
			fg_lpm_key_from_cidr(&p->tenants[i].sources[s], &want[n].key);
			want[n++].owner = i;
		}
	}
	/* sorted, so that telling kept from stale is a search, not a scan: a
	 * full trie of FG_MAP_MAX_STATIC is walked in O(n log n) */
	if (n)
		qsort(want, n, sizeof(*want), cmp_listed_source);
	/* Add and update first, then remove what is gone: a reload never
	 * leaves a moment where a still-listed source is unattributed. Only
	 * when the old and the new sources do not fit in the trie side by
	 * side (each fits alone) do the ones that did not fit wait for the
	 * removal. */
	size_t added = 0;
	int full = add_static_sources(m, p, want, n, &added, true, err, errlen);
	if (full < 0)
		goto out;
	/* The stale ones are collected in one walk and deleted after it:
	 * deleting from an LPM trie mid-walk can reorder the walk. */
	stale = calloc(FG_MAP_MAX_STATIC, sizeof(*stale));
	if (!stale) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (int more = !bpf_map_get_next_key(m->src_tenant_fd, NULL, &key);
	     more && n_stale < FG_MAP_MAX_STATIC; key = next) {
		struct listed_source probe = { .key = key };

		more = !bpf_map_get_next_key(m->src_tenant_fd, &key, &next);
		if (!n || !bsearch(&probe, want, n, sizeof(*want), cmp_listed_source))
			stale[n_stale++] = key;
	}
	for (size_t i = 0; i < n_stale; i++) {
		if (bpf_map_delete_elem(m->src_tenant_fd, &stale[i]) && errno != ENOENT) {
			snprintf(err, errlen, "removing a stale source from %s: %s",
				 FG_MAP_NAME(FG_MAP_SRC_TENANT), strerror(errno));
			goto out;
		}
	}
	if (full && add_static_sources(m, p, want, n, &added, false, err, errlen))
		goto out;
	rc = 0;
out:
	free(want);
	free(stale);
	return rc;
}

/* Learned sources name tenants by id; move them with their tenant or drop
 * them when the tenant left the policy. */
static void remap_learned(struct fg_maps *m, const int *new_id_of_old)
{
	struct fg_src_key key, next;
	struct fg_src_learned v;
	int more = !bpf_map_get_next_key(m->src_learned_fd, NULL, &key);

	while (more) {
		more = !bpf_map_get_next_key(m->src_learned_fd, &key, &next);
		if (!bpf_map_lookup_elem(m->src_learned_fd, &key, &v)) {
			int to = v.tenant_id < FG_MAP_MAX_TENANTS ? new_id_of_old[v.tenant_id] : -1;

			if (to < 0) {
				bpf_map_delete_elem(m->src_learned_fd, &key);
			} else if ((uint32_t)to != v.tenant_id) {
				v.tenant_id = (uint32_t)to;
				bpf_map_update_elem(m->src_learned_fd, &key, &v, BPF_EXIST);
			}
		}
		key = next;
	}
}

/* The slots' active names in order, for a search per new tenant: comparing
 * each new tenant with every slot is 2^32 compares at 65,536 tenants. */
static int cmp_slot_name(const void *a, const void *b, void *ctx)
{
	const struct fg_tenant_state *slot = ctx;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	int c = strncmp(slot[x].name, slot[y].name, FG_NAME_LEN);

	return c ? c : (x > y) - (x < y); /* the lowest id of a name first */
}

static int match_names(const struct fg_tenant_state *old, const struct fg_policy *p,
		       int *old_id_of_new, int *new_id_of_old)
{
	uint32_t *order = malloc(sizeof(*order) * FG_MAP_MAX_TENANTS), n = 0;

	if (!order)
		return -1;
	for (uint32_t j = 0; j < FG_MAP_MAX_TENANTS; j++)
		if (old[j].flags & FG_TENANT_ACTIVE)
			order[n++] = j;
	qsort_r(order, n, sizeof(*order), cmp_slot_name, (void *)old);
	for (uint32_t i = 0; i < p->n_tenants; i++) {
		size_t lo = 0, hi = n;

		while (lo < hi) { /* the first slot whose name is not below */
			size_t mid = lo + (hi - lo) / 2;

			if (strncmp(old[order[mid]].name, p->tenants[i].name, FG_NAME_LEN) < 0)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < n && !strncmp(old[order[lo]].name, p->tenants[i].name, FG_NAME_LEN) &&
		    new_id_of_old[order[lo]] < 0) {
			old_id_of_new[i] = (int)order[lo];
			new_id_of_old[order[lo]] = (int)i;
		}
	}
	free(order);
	return 0;
}

int fg_maps_apply_policy(struct fg_maps *m, const struct fg_policy *p, char *err, size_t errlen)
{
	struct fg_tenant_state *old = malloc(sizeof(*old) * FG_MAP_MAX_TENANTS);
	int *new_id_of_old = malloc(sizeof(int) * FG_MAP_MAX_TENANTS);
	int *old_id_of_new = malloc(sizeof(int) * FG_MAP_MAX_TENANTS);
	bool remapped = false;
	int rc = -1;

	if (!old || !new_id_of_old || !old_id_of_new) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	if (p->n_tenants > FG_MAP_MAX_TENANTS) {
		snprintf(err, errlen, "%u tenants, the maps hold %d", p->n_tenants,
			 FG_MAP_MAX_TENANTS);
		goto out;
	}
	memcpy(old, m->tenants, sizeof(*old) * FG_MAP_MAX_TENANTS);
	for (int i = 0; i < FG_MAP_MAX_TENANTS; i++)
		new_id_of_old[i] = old_id_of_new[i] = -1;
	if (match_names(old, p, old_id_of_new, new_id_of_old)) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}

	/* Tenant ids may move under every source: gate's cache and index stop
	 * answering now, not only once the sources follow (below). */
	fg_maps_sources_changed(m);

	/* Counters follow their tenant: snapshot every slot first, then write
	 * each new id from its tenant's old id, so no move clobbers another. */
	for (uint32_t i = 0; i < p->n_tenants; i++)
		if (old_id_of_new[i] >= 0 && (uint32_t)old_id_of_new[i] != i)
			remapped = true;
	if (remapped) {
		size_t stride = (sizeof(struct fg_tenant_counters) + 7) & ~(size_t)7;
		uint8_t *saved = calloc(FG_MAP_MAX_TENANTS, stride * (size_t)m->ncpus);

		if (!saved) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
		for (uint32_t i = 0; i < FG_MAP_MAX_TENANTS; i++)
			bpf_map_lookup_elem(m->tenant_stats_fd, &i,
					    saved + (size_t)i * stride * (size_t)m->ncpus);
		for (uint32_t i = 0; i < FG_MAP_MAX_TENANTS; i++) {
			int from = i < p->n_tenants ? old_id_of_new[i] : -1;
			uint8_t *src = from >= 0 ? saved + (size_t)from * stride * (size_t)m->ncpus
						 : NULL;

			if (from == (int)i)
				continue;
			if (src)
				bpf_map_update_elem(m->tenant_stats_fd, &i, src, BPF_ANY);
			else if (old[i].flags & FG_TENANT_ACTIVE)
				zero_counters(m, i);
		}
		free(saved);
	} else {
		for (uint32_t i = 0; i < FG_MAP_MAX_TENANTS; i++)
			if ((old[i].flags & FG_TENANT_ACTIVE) && new_id_of_old[i] < 0)
				zero_counters(m, i);
	}

	for (uint32_t i = 0; i < FG_MAP_MAX_TENANTS; i++) {
		struct fg_tenant_state *t = &m->tenants[i];
		int from = i < p->n_tenants ? old_id_of_new[i] : -1;

		if (i >= p->n_tenants) {
			if (old[i].flags || old[i].name[0])
				memset(t, 0, sizeof(*t));
			continue;
		}
		if (from != (int)i) {
			struct fg_tenant_state fresh = { 0 };

			if (from >= 0)
				fresh = old[from];
			fresh.flags = 0;
			__atomic_store_n(&t->deny_until_ns, 0, __ATOMIC_RELEASE);
			memcpy(t, &fresh, sizeof(fresh));
		}
		fill_tenant(t, p, &p->tenants[i]);
	}
	if (remapped || p->n_tenants < FG_MAP_MAX_TENANTS)
		remap_learned(m, new_id_of_old);

	if (apply_node(m, p)) {
		snprintf(err, errlen, "getrandom: %s", strerror(errno));
		goto out;
	}
	if (apply_static_sources(m, p, err, errlen))
		goto out;
	rc = 0;
out:
	/* Tenant ids, learned and static sources may all have moved. */
	fg_maps_sources_changed(m);
	free(old);
	free(new_id_of_old);
	free(old_id_of_new);
	return rc;
}
