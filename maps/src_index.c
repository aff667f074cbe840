/* src_index.c — gate's source index, userspace side: see src_index.h and,
 * for the layout and the rules gate reads it by, maps/fairgate_maps.h.
 *
 * Two writers share the index: fairgated's main thread, which learns
 * sources one at a time (fg_src_index_learned, a slot in the half gate
 * reads), and the rebuilder, which reads both maps whole into the other
 * half and flips. One mutex orders them. The main thread never waits for
 * a rebuild's map reads: the rebuilder holds the mutex only to start and
 * to publish, and the learns that happen in between are kept (pending)
 * and written into the new half before it is published. A bulk change in
 * between (eviction, policy) makes the build stale: it is thrown away and
 * redone, never published. */
#include "maps/src_index.h"
#include "maps/kernel_maps.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <bpf/bpf.h>

#define PENDING_MAX 4096
#define MIN_SLOTS 256

struct pending_learn {
	uint64_t a[2];
	uint32_t answer;
};

struct fg_src_index_rt {
	pthread_mutex_t rebuilding; /* one rebuild at a time: they share a half */
	pthread_mutex_t lock;
	pthread_cond_t wake;
	pthread_t thread;
	bool running, stop;
	bool dirty;       /* a bulk change waits for a rebuild */
	bool building;    /* the rebuilder is reading the maps */
	bool stale_build; /* ... and a bulk change happened meanwhile */
	struct pending_learn pending[PENDING_MAX];
	unsigned n_pending;
	struct fg_src_index_stats stats;
};

static uint64_t coarse_now_ns(void)
{
	struct timespec ts;

	/* gate's clock: bpf_ktime_get_coarse_ns() */
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct fg_src_index_rt *runtime(struct fg_maps *m)
{
	if (!m->src_index || !m->src_index_fp || !m->node)
		return NULL;
	if (!m->idx_rt) {
		struct fg_src_index_rt *rt = calloc(1, sizeof(*rt));

		if (!rt)
			return NULL;
		pthread_mutex_init(&rt->rebuilding, NULL);
		pthread_mutex_init(&rt->lock, NULL);
		pthread_cond_init(&rt->wake, NULL);
		m->idx_rt = rt;
	}
	return m->idx_rt;
}

/* ---- one half ---- */

static void seq_begin(struct fg_src_index_head *hd)
{
	uint32_t s = __atomic_load_n(&hd->seq, __ATOMIC_RELAXED);

	__atomic_store_n(&hd->seq, (s | 1) == s ? s + 2 : s | 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
}

static void seq_end(struct fg_src_index_head *hd)
{
	uint32_t s = __atomic_load_n(&hd->seq, __ATOMIC_RELAXED);

	__atomic_store_n(&hd->seq, s + 1, __ATOMIC_RELEASE);
}

static uint32_t learned_answer(const struct fg_src_learned *v)
{
	return fg_src_index_answer(v->tenant_id) | ((v->flags & FG_SRC_SHARED) ? FG_IDX_SHARED : 0);
}

/* A CIDR's prefix length as the index keys it (an LPM key may claim more
 * than the 128 bits it has). */
static uint8_t static_len(const struct fg_lpm_key *k)
{
	return (uint8_t)(k->prefixlen > 128 ? 128 : k->prefixlen);
}

/* Put a key in a table (and, for the learned one, its fingerprint in fps:
 * the u64 words seen as u16 lanes, slot i in lane i, little-endian). */
static bool table_put(struct fg_src_index_slot *t, uint16_t *fps, uint32_t mask, uint32_t probes,
		      uint32_t hash, uint32_t tag, uint64_t a0, uint64_t a1, uint32_t answer)
{
	for (uint32_t i = 0; i < probes; i++) {
		uint32_t slot = (hash + i) & mask;
		struct fg_src_index_slot *e = &t[slot];

		if (e->tag && (e->tag != tag || e->addr[0] != a0 || e->addr[1] != a1))
			continue;
		e->addr[0] = a0;
		e->addr[1] = a1;
		e->answer = answer;
		__atomic_store_n(&e->tag, tag, __ATOMIC_RELAXED);
		if (fps)
			__atomic_store_n(&fps[slot], fg_src_index_fp(hash), __ATOMIC_RELAXED);
		return true;
	}
	return false;
}

static uint16_t *half_fps(struct fg_maps *m, uint32_t h)
{
	return (uint16_t *)(m->src_index_fp + (size_t)h * FG_IDX_FP_WORDS);
}

static uint32_t table_mask(uint32_t n, uint32_t cap)
{
	uint32_t slots = MIN_SLOTS;

	while (slots < 4 * n && slots < cap)
		slots *= 2;
	return slots - 1;
}

static void static_words(const struct fg_lpm_key *k, uint64_t a[2])
{
	uint32_t len = static_len(k);

	memcpy(a, k->addr, 16);
	a[0] &= fg_prefix_mask64(len);
	a[1] = len > 64 ? a[1] & fg_prefix_mask64(len - 64) : 0;
}

static int cmp_len_desc(const void *x, const void *y)
{
	return (int)*(const uint8_t *)y - (int)*(const uint8_t *)x;
}

struct snapshot {
	struct fg_src_key *lkeys;
	struct fg_src_learned *lvals;
	uint32_t n_learned;
	struct fg_lpm_key *skeys;
	struct fg_src_static *svals;
	uint32_t n_static;
	uint64_t read_ns;
};

enum fill_result { FILLED, LEARNED_CLUSTER, STATIC_CLUSTER };

/* Fill the tables of half h from a snapshot with the hash key in its
 * header; a key that lands farther from its hash's slot than the table's
 * probes reach (a long cluster) says which table. */
static enum fill_result fill_tables(struct fg_maps *m, uint32_t h, const struct snapshot *sn,
				    uint32_t lmask, uint32_t smask, bool by_trie)
{
	struct fg_src_index_head *hd = &m->node->idx[h];
	struct fg_src_index_slot *learned = m->src_index + (size_t)h * FG_IDX_HALF_SLOTS;
	struct fg_src_index_slot *statics = learned + FG_IDX_LEARNED_SLOTS;

	memset(learned, 0, ((size_t)lmask + 1) * sizeof(*learned));
	memset(half_fps(m, h), 0, ((size_t)lmask + 1) * sizeof(uint16_t));
	for (uint32_t i = 0; i < sn->n_learned; i++) {
		uint64_t a[2];

		memcpy(a, sn->lkeys[i].addr, 16);
		if (!table_put(learned, half_fps(m, h), lmask, FG_IDX_PROBES,
			       fg_src_index_hash(hd->hash_key, a[0], a[1], 0), 1, a[0], a[1],
			       learned_answer(&sn->lvals[i])))
			return LEARNED_CLUSTER;
	}
	if (by_trie)
		return FILLED;
	memset(statics, 0, ((size_t)smask + 1) * sizeof(*statics));
	for (uint32_t i = 0; i < sn->n_static; i++) {
		uint32_t tag = 1u + static_len(&sn->skeys[i]);
		uint64_t a[2];

		static_words(&sn->skeys[i], a);
		if (!table_put(statics, NULL, smask, FG_IDX_STATIC_PROBES,
			       fg_src_index_hash(hd->hash_key, a[0], a[1], tag), tag, a[0], a[1],
			       fg_src_index_answer(sn->svals[i].tenant_id)))
			return STATIC_CLUSTER;
	}
	return FILLED;
}

/* Fill half h from a snapshot; the half is left invalid (valid is set at
 * publish). */
static int build_half(struct fg_maps *m, uint32_t h, const struct snapshot *sn,
		      struct fg_src_index_stats *st)
{
	struct fg_src_index_head *hd = &m->node->idx[h];
	uint8_t lens[FG_IDX_MAX_LENS];
	uint32_t n_lens = 0, lmask = table_mask(sn->n_learned, FG_IDX_LEARNED_SLOTS);
	uint32_t smask = table_mask(sn->n_static, FG_IDX_STATIC_SLOTS);
	unsigned learned_clusters = 0, static_clusters = 0;
	bool by_trie = false, placed = false;

	seq_begin(hd);
	__atomic_store_n(&hd->valid, 0, __ATOMIC_RELAXED);

	for (uint32_t i = 0; i < sn->n_static && !by_trie; i++) {
		uint8_t len = static_len(&sn->skeys[i]);
		bool seen = false;

		for (uint32_t j = 0; j < n_lens && !seen; j++)
			seen = lens[j] == len;
		if (seen)
			continue;
		if (n_lens == FG_IDX_MAX_LENS)
			by_trie = true;
		else
			lens[n_lens++] = len;
	}
	qsort(lens, n_lens, 1, cmp_len_desc);

	/* A long cluster is bad luck with the key: draw another; every
	 * fourth time spread that table wider while it can grow. CIDRs that
	 * still do not fit are left to the trie; learned addresses that do
	 * not (at the maps' limit, one key in several) get more draws. */
	for (int attempt = 0; attempt < 48 && !placed; attempt++) {
		if (getrandom(hd->hash_key, sizeof(hd->hash_key), 0) != sizeof(hd->hash_key))
			break;
		switch (fill_tables(m, h, sn, lmask, smask, by_trie)) {
		case FILLED:
			placed = true;
			break;
		case LEARNED_CLUSTER:
			if (++learned_clusters % 4 == 0 && lmask + 1 < FG_IDX_LEARNED_SLOTS)
				lmask = lmask * 2 + 1;
			break;
		case STATIC_CLUSTER:
			if (++static_clusters % 4 == 0) {
				if (smask + 1 < FG_IDX_STATIC_SLOTS)
					smask = smask * 2 + 1;
				else
					by_trie = true;
			}
			break;
		}
	}
	if (!placed) {
		seq_end(hd);
		return -1;
	}
	hd->learned_mask = lmask;
	hd->static_mask = smask;
	memset(hd->lens, 0, sizeof(hd->lens));
	memcpy(hd->lens, lens, n_lens);
	hd->n_lens = by_trie ? FG_IDX_LENS_TRIE : (uint8_t)n_lens;
	hd->built_ns = sn->read_ns;
	seq_end(hd);
	st->learned = sn->n_learned;
	st->statics = sn->n_static;
	st->static_by_trie = by_trie;
	return 0;
}

/* One learned entry into half h; with no room near its slot the half
 * stops counting and a rebuild (which spreads the table wider) is asked
 * for. Called with the lock held. */
static void put_learned(struct fg_maps *m, struct fg_src_index_rt *rt, uint32_t h,
			const uint64_t a[2], uint32_t answer)
{
	struct fg_src_index_head *hd = &m->node->idx[h];
	struct fg_src_index_slot *learned = m->src_index + (size_t)h * FG_IDX_HALF_SLOTS;

	seq_begin(hd);
	if (!table_put(learned, half_fps(m, h), hd->learned_mask & (FG_IDX_LEARNED_SLOTS - 1),
		       FG_IDX_PROBES,
		       fg_src_index_hash(hd->hash_key, a[0], a[1], 0), 1, a[0], a[1], answer)) {
		__atomic_store_n(&hd->valid, 0, __ATOMIC_RELAXED);
		rt->dirty = true;
		pthread_cond_signal(&rt->wake);
	}
	seq_end(hd);
}

/* ---- reading the maps ---- */

static int read_static(const struct fg_maps *m, struct snapshot *sn)
{
	uint32_t cap = FG_MAP_MAX_STATIC, n = 0;
	struct fg_lpm_key key, next;

	sn->skeys = calloc(cap, sizeof(*sn->skeys));
	sn->svals = calloc(cap, sizeof(*sn->svals));
	if (!sn->skeys || !sn->svals)
		return -1;
	/* Walked: the kernel's generic batch lookup for an LPM trie does the
	 * same walk and measured slower (55 ms against 46 for a rebuild at the
	 * maps' limits, fg-gate-bench). An entry deleted under the walk
	 * restarts it at worst (a rebuild then reads it again). */
	for (int more = !bpf_map_get_next_key(m->src_tenant_fd, NULL, &key); more && n < cap;) {
		more = !bpf_map_get_next_key(m->src_tenant_fd, &key, &next);
		if (!bpf_map_lookup_elem(m->src_tenant_fd, &key, &sn->svals[n]))
			sn->skeys[n++] = key;
		key = next;
	}
	sn->n_static = n;
	return 0;
}

static void snapshot_free(struct snapshot *sn)
{
	free(sn->lkeys);
	free(sn->lvals);
	free(sn->skeys);
	free(sn->svals);
}

/* Defined here, declared in kernel_maps.h: the index reads it to compile,
 * and kernel_maps.c (which calls this file) reads it to evict. */
int fg_maps_read_learned(const struct fg_maps *m, struct fg_src_key **keys,
			 struct fg_src_learned **vals, uint32_t *n)
{
	uint32_t cap = FG_MAP_MAX_LEARNED, out_batch = 0;

	*n = 0;
	*keys = calloc(cap, sizeof(**keys));
	*vals = calloc(cap, sizeof(**vals));
	if (!*keys || !*vals)
		return -1;
	for (int first = 1; *n < cap; first = 0) {
		uint32_t in_batch = out_batch, count = cap - *n;
		int err = bpf_map_lookup_batch(m->src_learned_fd, first ? NULL : &in_batch,
					       &out_batch, *keys + *n, *vals + *n, &count, NULL);

		*n += count;
		if (err)
			return errno == ENOENT ? 0 : -1;
	}
	return 0;
}

static int read_maps(const struct fg_maps *m, struct snapshot *sn)
{
	memset(sn, 0, sizeof(*sn));
	sn->read_ns = coarse_now_ns();
	if (fg_maps_read_learned(m, &sn->lkeys, &sn->lvals, &sn->n_learned) ||
	    read_static(m, sn))
		return -1;
	return 0;
}

/* ---- rebuild ---- */

static int rebuild(struct fg_maps *m, struct fg_src_index_rt *rt)
{
	struct snapshot sn;
	struct fg_src_index_stats st = { 0 };
	uint32_t to;
	int rc;

	pthread_mutex_lock(&rt->rebuilding);
	pthread_mutex_lock(&rt->lock);
	rt->building = true;
	rt->stale_build = false;
	rt->dirty = false;
	rt->n_pending = 0;
	/* Only this function flips, so the other half is ours until then. */
	to = !(__atomic_load_n(&m->node->idx_active, __ATOMIC_RELAXED) & 1);
	pthread_mutex_unlock(&rt->lock);

	rc = read_maps(m, &sn);
	if (!rc)
		rc = build_half(m, to, &sn, &st);
	snapshot_free(&sn);

	pthread_mutex_lock(&rt->lock);
	rt->building = false;
	if (rc) {
		rt->stats.failed++;
	} else if (rt->stale_build) {
		/* a bulk change since the maps were read: this copy is not it */
		rt->stats.discarded++;
		rt->dirty = true;
		rc = -1;
	} else {
		struct fg_src_index_head *hd = &m->node->idx[to];

		/* valid only now: a discarded build never was, and a straggling
		 * reader of this half saw it odd or invalid until here */
		seq_begin(hd);
		__atomic_store_n(&hd->valid, 1, __ATOMIC_RELAXED);
		seq_end(hd);
		for (unsigned i = 0; i < rt->n_pending; i++)
			put_learned(m, rt, to, rt->pending[i].a, rt->pending[i].answer);
		rt->stats.learned_while_building += rt->n_pending;
		__atomic_store_n(&m->node->idx_active, to, __ATOMIC_RELEASE);
		rt->stats.rebuilds++;
		rt->stats.learned = st.learned;
		rt->stats.statics = st.statics;
		rt->stats.static_by_trie = st.static_by_trie;
	}
	pthread_mutex_unlock(&rt->lock);
	pthread_mutex_unlock(&rt->rebuilding);
	return rc;
}

int fg_src_index_rebuild(struct fg_maps *m)
{
	struct fg_src_index_rt *rt = runtime(m);

	return rt ? rebuild(m, rt) : -1;
}

void fg_src_index_learned(struct fg_maps *m, const struct fg_src_key *k,
			  const struct fg_src_learned *v)
{
	struct fg_src_index_rt *rt = m->idx_rt;
	uint64_t a[2];
	uint32_t h;

	if (!rt)
		return;
	memcpy(a, k->addr, 16);
	pthread_mutex_lock(&rt->lock);
	h = __atomic_load_n(&m->node->idx_active, __ATOMIC_RELAXED) & 1;
	if (__atomic_load_n(&m->node->idx[h].valid, __ATOMIC_RELAXED))
		put_learned(m, rt, h, a, learned_answer(v));
	if (rt->building) {
		if (rt->n_pending < PENDING_MAX)
			rt->pending[rt->n_pending++] = (struct pending_learn){ { a[0], a[1] },
									      learned_answer(v) };
		else
			rt->stale_build = true;
	}
	pthread_mutex_unlock(&rt->lock);
}

void fg_src_index_invalidate(struct fg_maps *m)
{
	struct fg_src_index_rt *rt = m->idx_rt;

	if (!m->src_index || !m->src_index_fp || !m->node)
		return;
	if (rt)
		pthread_mutex_lock(&rt->lock);
	for (int h = 0; h < 2; h++)
		__atomic_store_n(&m->node->idx[h].valid, 0, __ATOMIC_RELEASE);
	if (rt) {
		rt->stale_build |= rt->building;
		rt->dirty = true;
		pthread_cond_signal(&rt->wake);
		pthread_mutex_unlock(&rt->lock);
	}
}

/* ---- the rebuilder thread ---- */

static void *rebuilder(void *arg)
{
	struct fg_maps *m = arg;
	struct fg_src_index_rt *rt = m->idx_rt;

	pthread_mutex_lock(&rt->lock);
	while (!rt->stop) {
		if (!rt->dirty) {
			struct timespec until;

			clock_gettime(CLOCK_MONOTONIC, &until);
			until.tv_nsec += (long)FG_IDX_REBUILD_MS * 1000000;
			until.tv_sec += until.tv_nsec / 1000000000;
			until.tv_nsec %= 1000000000;
			pthread_cond_timedwait(&rt->wake, &rt->lock, &until);
			if (rt->stop)
				break;
		}
		pthread_mutex_unlock(&rt->lock);
		rebuild(m, rt);
		pthread_mutex_lock(&rt->lock);
	}
	pthread_mutex_unlock(&rt->lock);
	return NULL;
}

int fg_src_index_start(struct fg_maps *m, char *err, size_t errlen)
{
	struct fg_src_index_rt *rt = runtime(m);
	pthread_condattr_t ca;
	int e;

	if (!rt) {
		snprintf(err, errlen, "source index: no %s map", FG_MAP_NAME(FG_MAP_SRC_INDEX));
		return -1;
	}
	if (rt->running)
		return 0;
	/* the waits are timed on CLOCK_MONOTONIC: the wall clock may jump */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_destroy(&rt->wake);
	pthread_cond_init(&rt->wake, &ca);
	pthread_condattr_destroy(&ca);
	rt->stop = false;
	rt->dirty = true;
	e = pthread_create(&rt->thread, NULL, rebuilder, m);
	if (e) {
		snprintf(err, errlen, "source index: starting its thread: %s", strerror(e));
		return -1;
	}
	rt->running = true;
	return 0;
}

void fg_src_index_stop(struct fg_maps *m)
{
	struct fg_src_index_rt *rt = m->idx_rt;

	if (!rt)
		return;
	if (rt->running) {
		pthread_mutex_lock(&rt->lock);
		rt->stop = true;
		pthread_cond_signal(&rt->wake);
		pthread_mutex_unlock(&rt->lock);
		pthread_join(rt->thread, NULL);
		rt->running = false;
	}
	pthread_cond_destroy(&rt->wake);
	pthread_mutex_destroy(&rt->lock);
	pthread_mutex_destroy(&rt->rebuilding);
	free(rt);
	m->idx_rt = NULL;
}

void fg_src_index_get_stats(struct fg_maps *m, struct fg_src_index_stats *out)
{
	struct fg_src_index_rt *rt = m->idx_rt;

	memset(out, 0, sizeof(*out));
	if (rt) {
		pthread_mutex_lock(&rt->lock);
		*out = rt->stats;
		pthread_mutex_unlock(&rt->lock);
	}
	if (m->src_index && m->node) {
		uint32_t h = __atomic_load_n(&m->node->idx_active, __ATOMIC_ACQUIRE) & 1;

		out->valid = __atomic_load_n(&m->node->idx[h].valid, __ATOMIC_ACQUIRE);
	}
}
