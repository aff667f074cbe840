/* kv_pool.h — the simulated replica's paged KV cache and its prefix cache.
 *
 * A fixed pool of blocks (block_size tokens each) shared by every sequence,
 * like vLLM's BlockPool: blocks are reference-counted, a freed block goes to
 * the tail of an LRU free queue but keeps its content hash, so a later
 * request with the same prefix can take it back ("cache hit") until the
 * allocator evicts it from the head of the queue. Hashes form a chain: each
 * block's hash covers its parent's hash and its token ids, and the first
 * block's hash also covers the request's cache_salt (vLLM semantics), so two
 * salts never share a block.
 *
 * Pure logic: no clock, no I/O.
 */
#ifndef FAIRGATE_SIM_KV_POOL_H
#define FAIRGATE_SIM_KV_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SIM_HASH_LEN 32 /* SHA-256 */
#define SIM_NO_BLOCK UINT32_MAX

struct sim_block_hash {
	uint8_t b[SIM_HASH_LEN];
};

struct sim_kv_block {
	uint32_t ref_cnt;
	uint32_t prev, next;  /* free queue links, SIM_NO_BLOCK at the ends */
	bool in_free_queue;
	bool cached;          /* `hash` is registered in the prefix cache */
	struct sim_block_hash hash;
};

struct sim_kv_pool {
	uint32_t num_blocks;
	uint32_t block_size;
	struct sim_kv_block *blocks;
	uint32_t free_head, free_tail, num_free;
	/* prefix cache: open addressing (linear probing) over block ids + 1 */
	uint32_t *slots;
	uint32_t slot_mask;
	uint32_t num_cached;
	uint64_t evictions;   /* cached blocks reused for new content */
};

int sim_kv_pool_init(struct sim_kv_pool *pool, uint32_t num_blocks, uint32_t block_size);
void sim_kv_pool_destroy(struct sim_kv_pool *pool);

/* Blocks not held by any sequence (free, possibly still cached). */
static inline uint32_t sim_kv_pool_num_free(const struct sim_kv_pool *pool)
{
	return pool->num_free;
}

/* vLLM's kv_cache_usage_perc: the fraction of blocks held by sequences. */
double sim_kv_pool_usage(const struct sim_kv_pool *pool);

/* The block whose registered hash is `h`, or SIM_NO_BLOCK. */
uint32_t sim_kv_pool_lookup(const struct sim_kv_pool *pool, const struct sim_block_hash *h);

/* Take a reference on a cached block (a prefix-cache hit); it leaves the
 * free queue if nobody held it. */
void sim_kv_pool_touch(struct sim_kv_pool *pool, uint32_t block);

/* Pop `n` blocks from the head of the free queue into out[], evicting their
 * cached hashes. Returns -1 (and takes nothing) if fewer than n are free. */
int sim_kv_pool_alloc(struct sim_kv_pool *pool, uint32_t n, uint32_t *out);

/* Drop one reference on each of blocks[0..n); blocks that reach zero join
 * the free queue's tail in reverse order, so a sequence's last blocks are
 * evicted first and its shared prefix survives longest (as vLLM does). */
void sim_kv_pool_release(struct sim_kv_pool *pool, const uint32_t *blocks, uint32_t n);

/* Register a full block's hash. A no-op if the block is already cached or
 * another block already holds the same hash. */
void sim_kv_pool_cache_block(struct sim_kv_pool *pool, uint32_t block,
			     const struct sim_block_hash *h);

/* hash = SHA-256(parent || token ids (u32 little-endian) || salt), where
 * parent is NULL for the first block and the salt is mixed in only there. */
void sim_block_hash_compute(struct sim_block_hash *out, const struct sim_block_hash *parent,
			    const uint32_t *tokens, uint32_t n_tokens, const char *salt,
			    size_t salt_len);

#endif
