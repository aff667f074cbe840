/* engine.h — one simulated vLLM replica: continuous batching in virtual time.
 *
 * The engine owns sequences, the waiting queue, the running batch and the KV
 * pool (kv_pool.h), and advances an explicit virtual clock one step at a
 * time; it never reads a real clock, so tests drive it directly and the
 * server (sim_server.c) paces it to the wall clock.
 *
 * A step follows vLLM's V1 scheduler: running sequences first (each decodes
 * one token, or continues a chunked prefill) within the batched-token
 * budget, preempting by recompute when blocks run out (FCFS: the latest
 * running sequence; priority: the max (priority, arrival)); then, if nothing
 * was preempted, waiting sequences are admitted head first, reusing
 * prefix-cached blocks, until the budget, max_num_seqs or the pool runs out.
 * Its duration comes from the cost model (policy/cost_model.h):
 *
 *   step_s = prefill_tokens * prompt_token_s
 *          + (decoding sequences ? fg_decode_step_s(sum of their contexts) : 0)
 *
 * where a decoding sequence's context is the KV it holds including the token
 * it decodes. A sequence whose prefill completes in a step samples its first
 * token at the end of that step.
 *
 * Use: sim_engine_add() at virtual time t, then repeatedly
 * sim_engine_step_begin() (plans the step, returns its duration) and
 * sim_engine_step_end() (advances the clock, delivers tokens through the
 * event callback). sim_engine_abort() may be called at any time.
 */
#ifndef FAIRGATE_SIM_ENGINE_H
#define FAIRGATE_SIM_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include "policy/cost_model.h"
#include "sim/histogram.h"
#include "sim/kv_pool.h"

enum sim_sched_policy { SIM_SCHED_FCFS = 0, SIM_SCHED_PRIORITY = 1 };
enum sim_output_len { SIM_OUTPUT_FIXED = 0, SIM_OUTPUT_UNIFORM = 1 };

struct sim_engine_config {
	uint32_t block_size;             /* tokens per KV block */
	uint32_t max_num_seqs;           /* running batch cap */
	uint32_t max_num_batched_tokens; /* per-step token budget (chunked prefill) */
	uint32_t max_model_len;          /* prompt + output cap per sequence */
	uint64_t kv_pool_tokens;         /* pool size; rounded down to whole blocks */
	enum sim_sched_policy policy;
	bool enable_prefix_caching;
	enum sim_output_len output_len;
	uint64_t seed;
};

/* vLLM's defaults (max_model_len is the seed model's 131072). */
void sim_engine_config_defaults(struct sim_engine_config *cfg, uint64_t kv_pool_tokens);

/* NULL if the config is consistent, else why not (static string). */
const char *sim_engine_config_check(const struct sim_engine_config *cfg);

enum sim_seq_state { SIM_SEQ_WAITING, SIM_SEQ_RUNNING, SIM_SEQ_FINISHED };
enum sim_finish { SIM_FINISH_NONE, SIM_FINISH_LENGTH, SIM_FINISH_STOP, SIM_FINISH_ABORT };

/* A sequence; fields are read-only outside the engine. Times are virtual
 * seconds; -1 until they happen. */
struct sim_seq {
	uint64_t id;                 /* arrival order, also the tie-breaker */
	void *user;
	enum sim_seq_state state;
	int32_t priority;
	double arrival, first_scheduled, first_token, last_token, finished;
	uint32_t *tokens;            /* prompt then generated ids */
	uint32_t n_prompt, n_tokens, cap_tokens;
	uint32_t max_output;         /* what the request allowed */
	uint32_t target_output;      /* when it stops (== max_output if fixed) */
	uint32_t n_output;
	uint32_t num_computed;       /* tokens whose KV is in the pool */
	uint32_t high_water;         /* most tokens ever computed (recompute accounting) */
	uint32_t cached_tokens;      /* prefix-cache hit on first admission */
	uint32_t num_preemptions;
	uint64_t recomputed_tokens;  /* prefill redone after preemption */
	enum sim_finish finish;
	bool aborted;
	/* KV */
	uint32_t *blocks;
	uint32_t n_blocks, cap_blocks;
	struct sim_block_hash *hashes; /* of full blocks, computed lazily */
	uint32_t n_hashes, cap_hashes;
	uint32_t n_blocks_cached;    /* blocks registered in the prefix cache */
	char *salt;
	uint32_t salt_len;
	/* waiting queue links */
	struct sim_seq *wprev, *wnext;
};

struct sim_seq_params {
	const uint32_t *prompt;
	uint32_t n_prompt;
	uint32_t max_tokens;
	uint32_t min_tokens;     /* a natural stop (uniform lengths) comes no earlier */
	bool ignore_eos;         /* no natural stop: run to max_tokens */
	int32_t priority;
	const char *cache_salt;  /* NULL = unsalted */
	void *user;
};

enum sim_event_kind {
	SIM_EV_TOKEN,     /* seq produced token n_output-1 (finish set if it was the last) */
	SIM_EV_PREEMPTED, /* seq lost its KV and went back to the waiting queue */
};

struct sim_event {
	enum sim_event_kind kind;
	struct sim_seq *seq;
	double time;
};

/* Called for each event; a seq whose TOKEN event has seq->finish set is
 * freed right after the callback returns. */
typedef void (*sim_event_cb)(void *ctx, const struct sim_event *ev);

struct sim_engine_stats {
	uint64_t steps;
	uint64_t num_preemptions;
	uint64_t prefix_cache_queries;   /* tokens looked up */
	uint64_t prefix_cache_hits;      /* tokens found */
	uint64_t prompt_tokens;          /* of requests whose prefill completed */
	uint64_t generation_tokens;
	uint64_t prefill_tokens_computed;/* incl. recompute, excl. cache hits */
	uint64_t recomputed_tokens;
	uint64_t requests_finished[4];   /* by enum sim_finish */
	double busy_s;                   /* virtual time spent in steps */
	struct sim_histogram ttft, tpot, e2e, queue;
};

/* What the last planned step does (for tests and logs). */
struct sim_step_info {
	double start, duration;
	uint32_t prefill_tokens;      /* computed this step (cache hits excluded) */
	uint32_t decode_seqs;
	uint64_t decode_context;      /* sum of decoding sequences' contexts */
	uint32_t scheduled_seqs;
	uint32_t preempted;
};

struct sim_engine;

struct sim_engine *sim_engine_new(const struct sim_engine_config *cfg,
				  const struct fg_cost_model *cm, sim_event_cb cb, void *cb_ctx);
void sim_engine_free(struct sim_engine *e);

/* Queue a sequence that arrived at virtual time `arrival` (>= the clock's
 * last value is not required; it only affects reported queue time). Returns
 * NULL when out of memory. The engine does not validate lengths: callers
 * check prompt + max_tokens <= max_model_len first. */
struct sim_seq *sim_engine_add(struct sim_engine *e, const struct sim_seq_params *p,
			       double arrival);

/* Remove a sequence (client went away). Inside a step it is dropped at
 * step end; no more events are delivered for it either way, and the
 * pointer must not be used again. */
void sim_engine_abort(struct sim_engine *e, struct sim_seq *seq);

bool sim_engine_has_work(const struct sim_engine *e);
bool sim_engine_in_step(const struct sim_engine *e);

/* Plan the next step at the current clock; returns its duration in virtual
 * seconds, or -1 if there is nothing to do. */
double sim_engine_step_begin(struct sim_engine *e);
/* Finish the planned step: clock += duration, tokens delivered. */
void sim_engine_step_end(struct sim_engine *e);

/* Move an idle engine's clock forward (never back). */
void sim_engine_advance_idle(struct sim_engine *e, double now);

double sim_engine_now(const struct sim_engine *e);
const struct sim_engine_stats *sim_engine_stats(const struct sim_engine *e);
const struct sim_step_info *sim_engine_last_step(const struct sim_engine *e);
const struct sim_kv_pool *sim_engine_pool(const struct sim_engine *e);
const struct sim_engine_config *sim_engine_config(const struct sim_engine *e);
uint32_t sim_engine_num_running(const struct sim_engine *e);
uint32_t sim_engine_num_waiting(const struct sim_engine *e);

const char *sim_finish_reason(enum sim_finish f);

#endif
