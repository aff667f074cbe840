/* kv_pool.c — block pool, LRU free queue and prefix-cache index; see kv_pool.h. */
#include "kv_pool.h"

#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash_key(const struct sim_block_hash *h)
{
	uint64_t k;

	memcpy(&k, h->b, sizeof(k)); /* SHA-256 output is already uniform */
	return k;
}

int sim_kv_pool_init(struct sim_kv_pool *pool, uint32_t num_blocks, uint32_t block_size)
{
	memset(pool, 0, sizeof(*pool));
	if (!num_blocks || !block_size)
		return -1;
	pool->num_blocks = num_blocks;
	pool->block_size = block_size;
	pool->blocks = calloc(num_blocks, sizeof(*pool->blocks));
	uint32_t cap = 16;
	while (cap < 2 * (uint64_t)num_blocks)
		cap *= 2;
	pool->slots = calloc(cap, sizeof(*pool->slots));
	if (!pool->blocks || !pool->slots) {
		sim_kv_pool_destroy(pool);
		return -1;
	}
	pool->slot_mask = cap - 1;
	for (uint32_t i = 0; i < num_blocks; i++) {
		pool->blocks[i].prev = i ? i - 1 : SIM_NO_BLOCK;
		pool->blocks[i].next = i + 1 < num_blocks ? i + 1 : SIM_NO_BLOCK;
		pool->blocks[i].in_free_queue = true;
	}
	pool->free_head = 0;
	pool->free_tail = num_blocks - 1;
	pool->num_free = num_blocks;
	return 0;
}

void sim_kv_pool_destroy(struct sim_kv_pool *pool)
{
	free(pool->blocks);
	free(pool->slots);
	memset(pool, 0, sizeof(*pool));
}

double sim_kv_pool_usage(const struct sim_kv_pool *pool)
{
	if (!pool->num_blocks)
		return 0;
	return 1.0 - (double)pool->num_free / pool->num_blocks;
}

/* ---- prefix-cache index ------------------------------------------------ */

uint32_t sim_kv_pool_lookup(const struct sim_kv_pool *pool, const struct sim_block_hash *h)
{
	for (uint32_t i = (uint32_t)hash_key(h) & pool->slot_mask;; i = (i + 1) & pool->slot_mask) {
		uint32_t s = pool->slots[i];
		if (!s)
			return SIM_NO_BLOCK;
		if (!memcmp(pool->blocks[s - 1].hash.b, h->b, SIM_HASH_LEN))
			return s - 1;
	}
}

static void index_remove(struct sim_kv_pool *pool, uint32_t block)
{
	uint32_t mask = pool->slot_mask;
	uint32_t i = (uint32_t)hash_key(&pool->blocks[block].hash) & mask;

	while (pool->slots[i] != block + 1)
		i = (i + 1) & mask;
	/* backward-shift deletion keeps probe chains intact without tombstones */
	for (uint32_t j = (i + 1) & mask; pool->slots[j]; j = (j + 1) & mask) {
		uint32_t home = (uint32_t)hash_key(&pool->blocks[pool->slots[j] - 1].hash) & mask;
		bool movable = i <= j ? (home <= i || home > j) : (home <= i && home > j);
		if (movable) {
			pool->slots[i] = pool->slots[j];
			i = j;
		}
	}
	pool->slots[i] = 0;
	pool->blocks[block].cached = false;
	pool->num_cached--;
}

void sim_kv_pool_cache_block(struct sim_kv_pool *pool, uint32_t block,
			     const struct sim_block_hash *h)
{
	struct sim_kv_block *b = &pool->blocks[block];

	if (b->cached || sim_kv_pool_lookup(pool, h) != SIM_NO_BLOCK)
		return;
	b->hash = *h;
	b->cached = true;
	uint32_t i = (uint32_t)hash_key(h) & pool->slot_mask;
	while (pool->slots[i])
		i = (i + 1) & pool->slot_mask;
	pool->slots[i] = block + 1;
	pool->num_cached++;
}

/* ---- free queue ---------------------------------------------------------- */

static void queue_unlink(struct sim_kv_pool *pool, uint32_t id)
{
	struct sim_kv_block *b = &pool->blocks[id];

	if (b->prev != SIM_NO_BLOCK)
		pool->blocks[b->prev].next = b->next;
	else
		pool->free_head = b->next;
	if (b->next != SIM_NO_BLOCK)
		pool->blocks[b->next].prev = b->prev;
	else
		pool->free_tail = b->prev;
	b->prev = b->next = SIM_NO_BLOCK;
	b->in_free_queue = false;
	pool->num_free--;
}

static void queue_append(struct sim_kv_pool *pool, uint32_t id)
{
	struct sim_kv_block *b = &pool->blocks[id];

	b->prev = pool->free_tail;
	b->next = SIM_NO_BLOCK;
	if (pool->free_tail != SIM_NO_BLOCK)
		pool->blocks[pool->free_tail].next = id;
	else
		pool->free_head = id;
	pool->free_tail = id;
	b->in_free_queue = true;
	pool->num_free++;
}

void sim_kv_pool_touch(struct sim_kv_pool *pool, uint32_t block)
{
	struct sim_kv_block *b = &pool->blocks[block];

	if (b->ref_cnt++ == 0 && b->in_free_queue)
		queue_unlink(pool, block);
}

int sim_kv_pool_alloc(struct sim_kv_pool *pool, uint32_t n, uint32_t *out)
{
	if (n > pool->num_free)
		return -1;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t id = pool->free_head;
		queue_unlink(pool, id);
		if (pool->blocks[id].cached) {
			index_remove(pool, id);
			pool->evictions++;
		}
		pool->blocks[id].ref_cnt = 1;
		out[i] = id;
	}
	return 0;
}

void sim_kv_pool_release(struct sim_kv_pool *pool, const uint32_t *blocks, uint32_t n)
{
	for (uint32_t i = n; i-- > 0;) {
		struct sim_kv_block *b = &pool->blocks[blocks[i]];
		if (b->ref_cnt && --b->ref_cnt == 0)
			queue_append(pool, blocks[i]);
	}
}

/* ---- hashing --------------------------------------------------------------- */

void sim_block_hash_compute(struct sim_block_hash *out, const struct sim_block_hash *parent,
			    const uint32_t *tokens, uint32_t n_tokens, const char *salt,
			    size_t salt_len)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	uint8_t le[4];
	unsigned int len = 0;

	EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
	if (parent)
		EVP_DigestUpdate(ctx, parent->b, SIM_HASH_LEN);
	for (uint32_t i = 0; i < n_tokens; i++) {
		le[0] = (uint8_t)tokens[i];
		le[1] = (uint8_t)(tokens[i] >> 8);
		le[2] = (uint8_t)(tokens[i] >> 16);
		le[3] = (uint8_t)(tokens[i] >> 24);
		EVP_DigestUpdate(ctx, le, sizeof(le));
	}
	if (!parent && salt && salt_len) {
		/* a separator, so a salt can never pose as more token bytes */
		EVP_DigestUpdate(ctx, "\0salt", 5);
		EVP_DigestUpdate(ctx, salt, salt_len);
	}
	EVP_DigestFinal_ex(ctx, out->b, &len);
	EVP_MD_CTX_free(ctx);
}
