/* src_index.h — gate's source index, userspace side: compile src_learned
 * and src_tenant into the pinned src_index array (layout and rules in
 * maps/fairgate_maps.h), keep the half gate reads in step with the agent's
 * own learning, and re-read the maps in a background thread so that edits
 * behind fairgated's back count too.
 *
 * Every function is a no-op on maps opened without src_index (fairgatectl,
 * old pins). Without a rebuild the index is simply not valid and the
 * programs ask the maps. */
#ifndef FAIRGATE_SRC_INDEX_H
#define FAIRGATE_SRC_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include "maps/fairgate_maps.h"

struct fg_maps;

/* Read both maps and write them into the half gate does not read, then
 * make it the one read. Synchronous; 0, or -1 (index left invalid). Used
 * by the thread, and directly by tests and benchmarks. */
int fg_src_index_rebuild(struct fg_maps *m);

/* A learned entry was added or changed in src_learned: write it into the
 * half gate reads, so the index stays valid (and into the half being
 * rebuilt, if any). */
void fg_src_index_learned(struct fg_maps *m, const struct fg_src_key *k,
			  const struct fg_src_learned *v);

/* src_learned or src_tenant changed in bulk (eviction, policy): the index
 * stops counting until the next rebuild, which is asked for now. */
void fg_src_index_invalidate(struct fg_maps *m);

/* The rebuilder: a thread that rebuilds at once after an invalidation and
 * every FG_IDX_REBUILD_MS otherwise. Start returns 0, or -1 with err. */
int fg_src_index_start(struct fg_maps *m, char *err, size_t errlen);
void fg_src_index_stop(struct fg_maps *m);

/* How rebuilds went, for fairgatectl status and the tests. */
struct fg_src_index_stats {
	bool valid;                     /* the half gate reads answers now */
	unsigned long long rebuilds;    /* published */
	unsigned long long failed;      /* could not be built (left invalid) */
	unsigned long long discarded;   /* overtaken by a bulk change: redone */
	unsigned long long learned_while_building; /* carried into the new half */
	unsigned learned, statics;      /* entries in the half gate reads */
	bool static_by_trie;            /* more prefix lengths than indexed */
};
void fg_src_index_get_stats(struct fg_maps *m, struct fg_src_index_stats *out);

#endif
