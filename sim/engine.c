/* engine.c — the scheduler and step loop of one simulated replica; see engine.h. */
#include "engine.h"

#include <stdlib.h>
#include <string.h>

#include "sim/tokenizer.h"

struct plan_entry {
	struct sim_seq *seq;
	uint32_t num_new;
	uint32_t prior_high_water; /* restored if the plan entry is taken back */
	bool decode;
};

static void sweep_aborted(struct sim_engine *e);

struct sim_engine {
	struct sim_engine_config cfg;
	struct fg_cost_model cm;
	sim_event_cb cb;
	void *cb_ctx;
	double now;
	uint64_t next_id;
	struct sim_kv_pool pool;
	struct sim_seq *wait_head, *wait_tail;
	uint32_t n_waiting;
	struct sim_seq **running;
	uint32_t n_running;
	struct plan_entry *plan;
	uint32_t n_plan;
	bool in_step;
	bool abort_pending;
	uint32_t *scratch;        /* block ids for one allocation or lookup */
	uint32_t scratch_cap;
	struct sim_step_info step;
	struct sim_engine_stats stats;
};

void sim_engine_config_defaults(struct sim_engine_config *cfg, uint64_t kv_pool_tokens)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->block_size = 16;
	cfg->max_num_seqs = 256;
	cfg->max_num_batched_tokens = 8192;
	cfg->max_model_len = 131072;
	cfg->kv_pool_tokens = kv_pool_tokens;
	cfg->policy = SIM_SCHED_FCFS;
	cfg->enable_prefix_caching = true;
	cfg->output_len = SIM_OUTPUT_FIXED;
	cfg->seed = 0;
}

const char *sim_engine_config_check(const struct sim_engine_config *cfg)
{
	if (!cfg->block_size || cfg->block_size > 1024)
		return "block size must be 1..1024";
	if (!cfg->max_num_seqs)
		return "max-num-seqs must be at least 1";
	if (cfg->max_num_batched_tokens < cfg->max_num_seqs)
		return "max-num-batched-tokens must be >= max-num-seqs";
	if (cfg->max_model_len < 2)
		return "max-model-len must be at least 2";
	if (cfg->kv_pool_tokens / cfg->block_size < 1)
		return "the KV pool holds no block";
	/* vLLM refuses to start when one max-length sequence cannot fit */
	if ((uint64_t)cfg->max_model_len > cfg->kv_pool_tokens / cfg->block_size * cfg->block_size)
		return "max-model-len is larger than the KV pool (vLLM refuses this too)";
	if (cfg->kv_pool_tokens / cfg->block_size > UINT32_MAX / 4)
		return "KV pool too large";
	return NULL;
}

const char *sim_finish_reason(enum sim_finish f)
{
	switch (f) {
	case SIM_FINISH_LENGTH: return "length";
	case SIM_FINISH_STOP: return "stop";
	case SIM_FINISH_ABORT: return "abort";
	default: return NULL;
	}
}

static uint64_t splitmix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

struct sim_engine *sim_engine_new(const struct sim_engine_config *cfg,
				  const struct fg_cost_model *cm, sim_event_cb cb, void *cb_ctx)
{
	if (sim_engine_config_check(cfg))
		return NULL;
	struct sim_engine *e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->cfg = *cfg;
	e->cm = *cm;
	e->cb = cb;
	e->cb_ctx = cb_ctx;
	e->scratch_cap = cfg->max_model_len / cfg->block_size + 2;
	e->scratch = calloc(e->scratch_cap, sizeof(*e->scratch));
	e->running = calloc(cfg->max_num_seqs, sizeof(*e->running));
	e->plan = calloc(cfg->max_num_seqs, sizeof(*e->plan));
	if (!e->scratch || !e->running || !e->plan ||
	    sim_kv_pool_init(&e->pool, (uint32_t)(cfg->kv_pool_tokens / cfg->block_size),
			     cfg->block_size)) {
		sim_engine_free(e);
		return NULL;
	}
	sim_histogram_init(&e->stats.ttft, sim_buckets_ttft_s, sim_buckets_ttft_n);
	sim_histogram_init(&e->stats.tpot, sim_buckets_tpot_s, sim_buckets_tpot_n);
	sim_histogram_init(&e->stats.e2e, sim_buckets_latency_s, sim_buckets_latency_n);
	sim_histogram_init(&e->stats.queue, sim_buckets_latency_s, sim_buckets_latency_n);
	return e;
}

static void seq_free(struct sim_seq *s)
{
	free(s->tokens);
	free(s->blocks);
	free(s->hashes);
	free(s->salt);
	free(s);
}

void sim_engine_free(struct sim_engine *e)
{
	if (!e)
		return;
	for (uint32_t i = 0; i < e->n_running; i++)
		seq_free(e->running[i]);
	for (struct sim_seq *s = e->wait_head, *n; s; s = n) {
		n = s->wnext;
		seq_free(s);
	}
	sim_kv_pool_destroy(&e->pool);
	free(e->scratch);
	free(e->running);
	free(e->plan);
	free(e);
}

/* ---- waiting queue ------------------------------------------------------ */

/* Priority order: lower value first, then earlier arrival, then id. */
static bool runs_before(const struct sim_seq *a, const struct sim_seq *b)
{
	if (a->priority != b->priority)
		return a->priority < b->priority;
	if (a->arrival != b->arrival)
		return a->arrival < b->arrival;
	return a->id < b->id;
}

static void wait_link_after(struct sim_engine *e, struct sim_seq *after, struct sim_seq *s)
{
	s->wprev = after;
	s->wnext = after ? after->wnext : e->wait_head;
	if (s->wnext)
		s->wnext->wprev = s;
	else
		e->wait_tail = s;
	if (after)
		after->wnext = s;
	else
		e->wait_head = s;
	e->n_waiting++;
}

static void wait_unlink(struct sim_engine *e, struct sim_seq *s)
{
	if (s->wprev)
		s->wprev->wnext = s->wnext;
	else
		e->wait_head = s->wnext;
	if (s->wnext)
		s->wnext->wprev = s->wprev;
	else
		e->wait_tail = s->wprev;
	s->wprev = s->wnext = NULL;
	e->n_waiting--;
}

/* New arrivals: FCFS appends; priority keeps the queue sorted. */
static void wait_push(struct sim_engine *e, struct sim_seq *s)
{
	struct sim_seq *after = e->wait_tail;

	if (e->cfg.policy == SIM_SCHED_PRIORITY)
		while (after && runs_before(s, after))
			after = after->wprev;
	wait_link_after(e, after, s);
}

/* Preempted sequences: FCFS puts them at the head (vLLM prepends). */
static void wait_requeue(struct sim_engine *e, struct sim_seq *s)
{
	if (e->cfg.policy == SIM_SCHED_PRIORITY)
		wait_push(e, s);
	else
		wait_link_after(e, NULL, s);
}

/* ---- sequences ------------------------------------------------------------- */

struct sim_seq *sim_engine_add(struct sim_engine *e, const struct sim_seq_params *p,
			       double arrival)
{
	struct sim_seq *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->id = e->next_id++;
	s->user = p->user;
	s->state = SIM_SEQ_WAITING;
	s->priority = p->priority;
	s->arrival = arrival;
	s->first_scheduled = s->first_token = s->last_token = s->finished = -1;
	s->max_output = p->max_tokens ? p->max_tokens : 1;
	s->cap_tokens = p->n_prompt + s->max_output;
	s->tokens = malloc((size_t)s->cap_tokens * sizeof(*s->tokens));
	if (p->cache_salt) {
		s->salt = strdup(p->cache_salt);
		s->salt_len = (uint32_t)strlen(p->cache_salt);
	}
	if (!s->tokens || (p->cache_salt && !s->salt)) {
		seq_free(s);
		return NULL;
	}
	memcpy(s->tokens, p->prompt, (size_t)p->n_prompt * sizeof(*s->tokens));
	s->n_prompt = s->n_tokens = p->n_prompt;

	s->target_output = s->max_output;
	if (e->cfg.output_len == SIM_OUTPUT_UNIFORM && !p->ignore_eos) {
		s->target_output = 1 + (uint32_t)(splitmix64(e->cfg.seed ^ (s->id * 0x2545f4914f6cdd1dull)) %
						  s->max_output);
		if (s->target_output < p->min_tokens)
			s->target_output = p->min_tokens < s->max_output ? p->min_tokens : s->max_output;
	}
	if (s->n_prompt < e->cfg.max_model_len &&
	    s->target_output > e->cfg.max_model_len - s->n_prompt)
		s->target_output = e->cfg.max_model_len - s->n_prompt;
	if (!s->target_output)
		s->target_output = 1;
	wait_push(e, s);
	return s;
}

static uint32_t output_token_id(const struct sim_engine *e, const struct sim_seq *s)
{
	return sim_output_token(splitmix64(e->cfg.seed ^ (s->id << 24) ^ s->n_tokens));
}

static int seq_reserve_blocks(struct sim_seq *s, uint32_t n)
{
	if (n <= s->cap_blocks)
		return 0;
	uint32_t cap = s->cap_blocks ? s->cap_blocks : 8;
	while (cap < n)
		cap *= 2;
	uint32_t *b = realloc(s->blocks, (size_t)cap * sizeof(*b));
	if (!b)
		return -1;
	s->blocks = b;
	s->cap_blocks = cap;
	return 0;
}

/* Hashes of the first n_full full blocks of the sequence's tokens. */
static int seq_hash_blocks(struct sim_engine *e, struct sim_seq *s, uint32_t n_full)
{
	uint32_t bs = e->cfg.block_size;

	if (n_full > s->cap_hashes) {
		uint32_t cap = s->cap_hashes ? s->cap_hashes : 8;
		while (cap < n_full)
			cap *= 2;
		struct sim_block_hash *h = realloc(s->hashes, (size_t)cap * sizeof(*h));
		if (!h)
			return -1;
		s->hashes = h;
		s->cap_hashes = cap;
	}
	for (uint32_t i = s->n_hashes; i < n_full; i++)
		sim_block_hash_compute(&s->hashes[i], i ? &s->hashes[i - 1] : NULL,
				       s->tokens + (size_t)i * bs, bs, s->salt, s->salt_len);
	if (n_full > s->n_hashes)
		s->n_hashes = n_full;
	return 0;
}

/* Register the sequence's newly full, computed blocks in the prefix cache
 * (at schedule time, as vLLM does). */
static void seq_cache_blocks(struct sim_engine *e, struct sim_seq *s)
{
	if (!e->cfg.enable_prefix_caching)
		return;
	uint32_t n_full = s->num_computed / e->cfg.block_size;
	if (n_full > s->n_blocks)
		n_full = s->n_blocks;
	if (n_full <= s->n_blocks_cached || seq_hash_blocks(e, s, n_full))
		return;
	for (uint32_t i = s->n_blocks_cached; i < n_full; i++)
		sim_kv_pool_cache_block(&e->pool, s->blocks[i], &s->hashes[i]);
	s->n_blocks_cached = n_full;
}

static void seq_release_kv(struct sim_engine *e, struct sim_seq *s)
{
	sim_kv_pool_release(&e->pool, s->blocks, s->n_blocks);
	s->n_blocks = 0;
	s->n_blocks_cached = 0;
	s->num_computed = 0;
}

/* Give the sequence enough blocks for num_computed + n_hit cached blocks +
 * num_new tokens. `hits` are cached blocks to take first. False (and no
 * change) when the pool cannot provide them. */
static bool seq_allocate(struct sim_engine *e, struct sim_seq *s, uint32_t num_new,
			 const uint32_t *hits, uint32_t n_hit)
{
	uint32_t bs = e->cfg.block_size;
	uint64_t tokens = (uint64_t)s->num_computed + (uint64_t)n_hit * bs + num_new;
	uint32_t want = (uint32_t)((tokens + bs - 1) / bs);
	uint32_t have = s->n_blocks + n_hit;
	uint32_t need = want > have ? want - have : 0;
	uint32_t hits_in_free_queue = 0;

	for (uint32_t i = 0; i < n_hit; i++)
		hits_in_free_queue += e->pool.blocks[hits[i]].ref_cnt == 0;
	if (need > sim_kv_pool_num_free(&e->pool) - hits_in_free_queue)
		return false;
	if (seq_reserve_blocks(s, s->n_blocks + n_hit + need))
		return false;
	for (uint32_t i = 0; i < n_hit; i++) {
		sim_kv_pool_touch(&e->pool, hits[i]);
		s->blocks[s->n_blocks++] = hits[i];
	}
	if (need) {
		sim_kv_pool_alloc(&e->pool, need, s->blocks + s->n_blocks);
		s->n_blocks += need;
	}
	return true;
}

/* The prefix-cache hit for a sequence entering from the waiting queue:
 * leading full blocks whose hash chain is cached, never the whole sequence
 * (its last token must be computed to sample from). Block ids go to
 * e->scratch; returns how many. */
static uint32_t find_cached_prefix(struct sim_engine *e, struct sim_seq *s)
{
	if (!e->cfg.enable_prefix_caching || s->n_tokens < 2)
		return 0;
	uint32_t n_full = (s->n_tokens - 1) / e->cfg.block_size;
	if (n_full > e->scratch_cap)
		n_full = e->scratch_cap;
	if (seq_hash_blocks(e, s, n_full))
		return 0;
	uint32_t n = 0;
	while (n < n_full) {
		uint32_t b = sim_kv_pool_lookup(&e->pool, &s->hashes[n]);
		if (b == SIM_NO_BLOCK)
			break;
		e->scratch[n++] = b;
	}
	return n;
}

/* ---- one step ------------------------------------------------------------- */

static void running_remove_at(struct sim_engine *e, uint32_t i)
{
	memmove(e->running + i, e->running + i + 1,
		(size_t)(e->n_running - i - 1) * sizeof(*e->running));
	e->n_running--;
}

static uint32_t running_index(const struct sim_engine *e, const struct sim_seq *s)
{
	for (uint32_t i = 0; i < e->n_running; i++)
		if (e->running[i] == s)
			return i;
	return UINT32_MAX;
}

static uint32_t pick_victim(const struct sim_engine *e)
{
	uint32_t v = e->n_running - 1;

	if (e->cfg.policy == SIM_SCHED_PRIORITY)
		for (uint32_t i = 0; i < e->n_running; i++)
			if (runs_before(e->running[v], e->running[i]))
				v = i;
	return v;
}

/* Count the tokens computed now and whether they redo lost work. */
static void account_compute(struct sim_engine *e, struct sim_seq *s, uint32_t num_new)
{
	uint32_t from = s->num_computed, to = from + num_new;

	if (s->high_water > from) {
		uint32_t redo = (to < s->high_water ? to : s->high_water) - from;
		s->recomputed_tokens += redo;
		e->stats.recomputed_tokens += redo;
	}
	if (to > s->high_water)
		s->high_water = to;
	s->num_computed = to;
}

static void plan_add(struct sim_engine *e, struct sim_seq *s, uint32_t num_new)
{
	struct plan_entry *p = &e->plan[e->n_plan++];

	p->seq = s;
	p->num_new = num_new;
	p->decode = num_new == 1 && s->n_output > 0 && s->num_computed + 1 == s->n_tokens;
	p->prior_high_water = s->high_water;
	if (s->first_scheduled < 0) {
		s->first_scheduled = e->now;
		sim_histogram_observe(&e->stats.queue, e->now - s->arrival);
	}
	account_compute(e, s, num_new);
	seq_cache_blocks(e, s);
}

/* Preempt running[v] by recompute; returns the step budget its plan entry
 * held, if it was already scheduled this step. */
static uint32_t preempt(struct sim_engine *e, uint32_t v)
{
	struct sim_seq *s = e->running[v];
	uint32_t refund = 0;

	for (uint32_t i = 0; i < e->n_plan; i++) {
		if (e->plan[i].seq != s)
			continue;
		refund = e->plan[i].num_new;
		s->high_water = e->plan[i].prior_high_water;
		memmove(e->plan + i, e->plan + i + 1, (size_t)(e->n_plan - i - 1) * sizeof(*e->plan));
		e->n_plan--;
		break;
	}
	running_remove_at(e, v);
	seq_release_kv(e, s);
	s->state = SIM_SEQ_WAITING;
	s->num_preemptions++;
	e->stats.num_preemptions++;
	e->step.preempted++;
	wait_requeue(e, s);
	if (e->cb) {
		struct sim_event ev = { .kind = SIM_EV_PREEMPTED, .seq = s, .time = e->now };
		e->cb(e->cb_ctx, &ev);
	}
	return refund;
}

static uint32_t schedule_running(struct sim_engine *e, uint32_t budget)
{
	uint32_t i = 0;

	while (i < e->n_running && budget > 0) {
		struct sim_seq *s = e->running[i];
		uint32_t num_new = s->n_tokens - s->num_computed;
		bool scheduled = false;

		if (num_new > budget)
			num_new = budget;
		for (;;) {
			if (seq_allocate(e, s, num_new, NULL, 0)) {
				scheduled = true;
				break;
			}
			uint32_t v = pick_victim(e);
			struct sim_seq *victim = e->running[v];
			budget += preempt(e, v);
			if (victim == s)
				break;
			if (v < i)
				i--;
		}
		if (!scheduled)
			break;
		plan_add(e, s, num_new);
		budget -= num_new;
		i++;
	}
	return budget;
}

static void schedule_waiting(struct sim_engine *e, uint32_t budget)
{
	while (e->wait_head && budget > 0 && e->n_running < e->cfg.max_num_seqs) {
		struct sim_seq *s = e->wait_head;
		uint32_t n_hit = find_cached_prefix(e, s);
		uint32_t hit_tokens = n_hit * e->cfg.block_size;
		uint32_t num_new = s->n_tokens - hit_tokens;

		if (num_new > budget)
			num_new = budget;
		if (!seq_allocate(e, s, num_new, e->scratch, n_hit))
			break; /* head-of-line blocks, as in vLLM */
		wait_unlink(e, s);
		s->state = SIM_SEQ_RUNNING;
		e->running[e->n_running++] = s;
		e->stats.prefix_cache_queries += s->n_tokens;
		e->stats.prefix_cache_hits += hit_tokens;
		if (s->first_scheduled < 0)
			s->cached_tokens = hit_tokens;
		s->num_computed = hit_tokens;
		plan_add(e, s, num_new);
		budget -= num_new;
	}
}

double sim_engine_step_begin(struct sim_engine *e)
{
	if (e->in_step || !sim_engine_has_work(e))
		return -1;
	memset(&e->step, 0, sizeof(e->step));
	e->step.start = e->now;
	e->n_plan = 0;
	e->in_step = true; /* callbacks that abort now defer to step end */

	/* A pass can end empty when the only sequence tried preempted itself
	 * (priority policy); vLLM then runs an empty step. Each such pass
	 * preempts someone, so retrying terminates. */
	for (uint32_t pass = 0; !e->n_plan && pass <= e->cfg.max_num_seqs + 1; pass++) {
		uint32_t preempted_before = e->step.preempted;
		uint32_t budget = schedule_running(e, e->cfg.max_num_batched_tokens);
		if (e->step.preempted == preempted_before)
			schedule_waiting(e, budget);
		if (!e->n_plan && e->step.preempted == preempted_before)
			break;
	}
	if (!e->n_plan) {
		e->in_step = false;
		if (e->abort_pending)
			sweep_aborted(e);
		return -1;
	}

	for (uint32_t i = 0; i < e->n_plan; i++) {
		const struct plan_entry *p = &e->plan[i];
		if (p->decode) {
			e->step.decode_seqs++;
			e->step.decode_context += p->seq->num_computed;
		} else {
			e->step.prefill_tokens += p->num_new;
		}
	}
	e->step.scheduled_seqs = e->n_plan;
	e->step.duration = fg_prefill_s(&e->cm, e->step.prefill_tokens);
	if (e->step.decode_seqs)
		e->step.duration += fg_decode_step_s(&e->cm, (double)e->step.decode_context);
	e->stats.prefill_tokens_computed += e->step.prefill_tokens;
	return e->step.duration;
}

static void finish_seq(struct sim_engine *e, struct sim_seq *s, enum sim_finish why)
{
	uint32_t i = running_index(e, s);

	if (i != UINT32_MAX)
		running_remove_at(e, i);
	else if (s->state == SIM_SEQ_WAITING)
		wait_unlink(e, s);
	seq_release_kv(e, s);
	s->state = SIM_SEQ_FINISHED;
	s->finish = why;
	s->finished = e->now;
	e->stats.requests_finished[why]++;
}

static void sample_token(struct sim_engine *e, struct sim_seq *s)
{
	s->tokens[s->n_tokens] = output_token_id(e, s);
	s->n_tokens++;
	s->n_output++;
	e->stats.generation_tokens++;
	if (s->n_output == 1) {
		s->first_token = e->now;
		e->stats.prompt_tokens += s->n_prompt;
		sim_histogram_observe(&e->stats.ttft, e->now - s->arrival);
	} else {
		sim_histogram_observe(&e->stats.tpot, e->now - s->last_token);
	}
	s->last_token = e->now;
	if (s->n_output >= s->target_output) {
		finish_seq(e, s, s->n_output < s->max_output ? SIM_FINISH_STOP : SIM_FINISH_LENGTH);
		sim_histogram_observe(&e->stats.e2e, e->now - s->arrival);
	}
}

static void sweep_aborted(struct sim_engine *e)
{
	for (uint32_t i = 0; i < e->n_running;) {
		struct sim_seq *s = e->running[i];
		if (!s->aborted) {
			i++;
			continue;
		}
		finish_seq(e, s, SIM_FINISH_ABORT);
		seq_free(s);
	}
	for (struct sim_seq *s = e->wait_head, *n; s; s = n) {
		n = s->wnext;
		if (s->aborted) {
			finish_seq(e, s, SIM_FINISH_ABORT);
			seq_free(s);
		}
	}
	e->abort_pending = false;
}

void sim_engine_step_end(struct sim_engine *e)
{
	if (!e->in_step)
		return;
	e->now = e->step.start + e->step.duration;
	e->stats.steps++;
	e->stats.busy_s += e->step.duration;
	for (uint32_t i = 0; i < e->n_plan; i++) {
		struct sim_seq *s = e->plan[i].seq;
		if (s->aborted || s->num_computed < s->n_tokens)
			continue; /* gone, or a prefill chunk that samples nothing */
		sample_token(e, s);
		if (e->cb) {
			struct sim_event ev = { .kind = SIM_EV_TOKEN, .seq = s, .time = e->now };
			e->cb(e->cb_ctx, &ev);
		}
		if (s->state == SIM_SEQ_FINISHED)
			seq_free(s);
	}
	e->n_plan = 0;
	e->in_step = false;
	if (e->abort_pending)
		sweep_aborted(e);
}

void sim_engine_abort(struct sim_engine *e, struct sim_seq *s)
{
	if (!s || s->state == SIM_SEQ_FINISHED || s->aborted)
		return;
	s->aborted = true;
	s->user = NULL;
	e->abort_pending = true;
	if (!e->in_step)
		sweep_aborted(e);
}

/* ---- accessors ------------------------------------------------------------- */

bool sim_engine_has_work(const struct sim_engine *e)
{
	return e->n_running || e->n_waiting;
}

bool sim_engine_in_step(const struct sim_engine *e)
{
	return e->in_step;
}

void sim_engine_advance_idle(struct sim_engine *e, double now)
{
	if (!e->in_step && now > e->now)
		e->now = now;
}

double sim_engine_now(const struct sim_engine *e) { return e->now; }
const struct sim_engine_stats *sim_engine_stats(const struct sim_engine *e) { return &e->stats; }
const struct sim_step_info *sim_engine_last_step(const struct sim_engine *e) { return &e->step; }
const struct sim_kv_pool *sim_engine_pool(const struct sim_engine *e) { return &e->pool; }
const struct sim_engine_config *sim_engine_config(const struct sim_engine *e) { return &e->cfg; }
uint32_t sim_engine_num_running(const struct sim_engine *e) { return e->n_running; }
uint32_t sim_engine_num_waiting(const struct sim_engine *e) { return e->n_waiting; }
