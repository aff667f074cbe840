/* cost_model.h — replica time as the unit of account.
 *
 * The one place that turns hardware and model numbers into prices. A unit is
 * the replica time of one uncached prompt token; everything a tenant does is
 * priced in units so that prompt tokens, output tokens and cached tokens are
 * comparable. Pure functions, no I/O: the agent, the simulator, the tests and
 * the benchmarks all call these.
 *
 * Output tokens (agent.output_pricing: context, the default) cost what their
 * decode step costs the sequence: its share of reading the weights at the
 * reference batch plus reading its own KV,
 *
 *   t(c) = weights / (gpus * hbm * mbu * batch) + c * kv_bytes_per_token / (gpus * hbm * mbu)
 *
 * where c is the KV the sequence holds in that step, counted the way the
 * simulator's engine counts it (sim/engine.c): the first output token is
 * sampled at the end of the prefill step, so it costs no decode step (its
 * replica time is the prompt's); the k-th output token (k >= 2) is decoded
 * from a context of prompt + k - 1 tokens. `flat` prices every output token
 * at t(reference context) (output_weight), the seed's 3.09 units.
 *
 * A decode step of `batch` sequences holding `context` tokens between them
 * takes
 *
 *   step(batch, context) = step_overhead + seq_overhead * batch
 *                        + (weights + context * kv_bytes_per_token) / (gpus * hbm * mbu)
 *
 * From a policy both overheads are 0 (the seed's model); a calibrated model
 * (policy/calibration.c, through fg_cost_model_calibrated) carries what the
 * engine was measured to take, so every price and step time below follows
 * the measurement with these formulas and no other.
 */
#ifndef FAIRGATE_COST_MODEL_H
#define FAIRGATE_COST_MODEL_H

#include <stdint.h>
#include "policy.h"

#define FG_HOURS_PER_MONTH 720.0

struct fg_cost_model {
	double prompt_token_s;        /* 2*params / (gpus*peak_flops*prefill_mfu) */
	double weights_bytes_per_gpu; /* params*weight_bytes / gpus */
	double decode_step_s;         /* at the reference batch and context */
	double output_token_s;        /* decode_step_s / batch = t(reference context) */
	double output_weight;         /* output_token_s / prompt_token_s */
	double output_weights_share_s;/* t(0): weights / (gpus*hbm*mbu*batch) */
	double output_s_per_context;  /* dt/dc: kv_bytes_per_token / (gpus*hbm*mbu) */
	double replica_units_per_s;   /* ceiling / prompt_token_s */
	double kv_bytes_per_token;    /* 2*layers*kv_heads*head_dim*kv_bytes */
	double kv_pool_tokens;
	double cached_prompt_weight;
	double dedicated_usd_per_month; /* gpus*usd_per_hour*720 */
	double hbm_effective_per_gpu; /* hbm_bytes_per_s*decode_mbu */
	double step_overhead_s;       /* a decode step's time beyond its reads (0 from a policy) */
	double seq_overhead_s;        /* each sequence's in a step (0 from a policy) */
	double ceiling;               /* replica.ceiling: the share of the replica sold */
	uint32_t gpus;
	uint32_t ref_batch;
	uint32_t ref_context;
	enum fg_output_pricing output_pricing; /* context unless set from a policy */
};

/* From the replica block alone: output priced by context. */
void fg_cost_model_init(struct fg_cost_model *cm, const struct fg_replica *r);
/* From a whole policy: the replica block and agent.output_pricing. */
void fg_cost_model_init_policy(struct fg_cost_model *cm, const struct fg_policy *p);

/* The derived fields (decode_step_s, output_token_s, output_weight,
 * output_weights_share_s, output_s_per_context, replica_units_per_s) again
 * from the base ones, after any of those changed. */
void fg_cost_model_derive(struct fg_cost_model *cm);

/* `assumed` with the measured prompt-token time and decode step
 * step(batch, context) = fixed + per_seq * batch + per_context * context:
 * the effective HBM rate is the one that reads a token of KV in
 * per_context, and step_overhead what `fixed` leaves after reading the
 * weights at that rate (negative when the weights read faster than the KV). */
void fg_cost_model_calibrated(struct fg_cost_model *out, const struct fg_cost_model *assumed,
			      double prompt_token_s, double step_fixed_s, double step_per_seq_s,
			      double step_per_context_s);

/* `assumed` with output prices set directly: the prompt-token time, t(0)
 * (output_weights_share_s) and dt/dc (output_s_per_context) at the
 * reference batch, and the per-sequence step overhead; the step overhead is
 * what makes t(0) at the reference batch. */
void fg_cost_model_priced(struct fg_cost_model *out, const struct fg_cost_model *assumed,
			  double prompt_token_s, double output_weights_share_s,
			  double output_s_per_context, double seq_overhead_s);

/* The measured efficiencies a model implies (1 = the policy's): the
 * prefill MFU and decode MBU over the policy's. */
double fg_cost_model_prefill_mfu_ratio(const struct fg_cost_model *cm,
				       const struct fg_cost_model *assumed);
double fg_cost_model_decode_mbu_ratio(const struct fg_cost_model *cm,
				      const struct fg_cost_model *assumed);

/* Decode step time for `batch` running sequences holding `total_context`
 * tokens of KV between them (the formula above). */
double fg_decode_step_batch_s(const struct fg_cost_model *cm, double batch,
			      double total_context_tokens);
/* The same when only the context is known: the batch it makes at the
 * reference context per sequence (total_context / ref_context). Exact for
 * any batch when seq_overhead_s is 0, as from a policy. */
double fg_decode_step_s(const struct fg_cost_model *cm, double total_context_tokens);

/* One engine step of a batch as the model sees it: `sequences` decoding
 * sequences holding `total_context` tokens of KV between them, with
 * `prefill_tokens` of prompt mixed into the same step (chunked prefill).
 * What a TPOT reservation keeps under its target (policy/tpot_reserve.c). */
double fg_batch_step_s(const struct fg_cost_model *cm, double sequences, double total_context,
		       double prefill_tokens);

/* Prefill time for n uncached prompt tokens. */
double fg_prefill_s(const struct fg_cost_model *cm, double tokens);

/* t(c): replica seconds of the decode step of one sequence holding `context`
 * tokens of KV (whatever the pricing mode: this is the replica's time). */
double fg_output_token_s(const struct fg_cost_model *cm, double context);

/* Units of `steps` consecutive decode steps of one sequence, the first
 * holding `context` tokens of KV and each next one token more: the sum of
 * t(context) .. t(context + steps - 1) over the prompt token, in closed form.
 * Continuous in `steps` (convex, 0 at 0), which settlement relies on. */
double fg_decode_units(const struct fg_cost_model *cm, double context, double steps);

/* Units of the output of `n` sequences (choices) sharing a `prompt`-token
 * prompt that produced `output` tokens between them. Under context pricing
 * the total is split equally over the choices: a choice's price is convex
 * in its length, so the equal split is the least any split of the same total
 * could cost (Jensen) and never bills more than the choices took. */
double fg_output_units(const struct fg_cost_model *cm, double prompt, double output, double n);

/* Units for a request that used `prompt` prompt tokens of which `cached`
 * came from the prefix cache, and produced `output` tokens in one choice
 * (fg_request_units_n: across n choices). */
double fg_request_units(const struct fg_cost_model *cm, double prompt, double cached,
			double output);
double fg_request_units_n(const struct fg_cost_model *cm, double prompt, double cached,
			  double output, double n);
/* A batch: `sequences` sequences over `prompts` distinct prompts (a
 * completions prompt array x n) whose tokens sum to `prompt`; each decodes
 * from the batch's mean prompt. */
double fg_request_units_batch(const struct fg_cost_model *cm, double prompt, double cached,
			      double output, double prompts, double sequences);

/* The same request priced under a metering mode (for comparing weaker quotas):
 * replica_time = fg_request_units; raw_tokens = prompt + output;
 * requests = one request costs the units of the reference request
 * (decode_context prompt tokens, no output) so rates stay comparable. */
double fg_metered_units(const struct fg_cost_model *cm, enum fg_metering mode,
			double prompt, double cached, double output);
double fg_metered_units_n(const struct fg_cost_model *cm, enum fg_metering mode,
			  double prompt, double cached, double output, double n);
double fg_metered_units_batch(const struct fg_cost_model *cm, enum fg_metering mode,
			      double prompt, double cached, double output, double prompts,
			      double sequences);

/* A steady tenant load. */
struct fg_load_cost {
	double units_per_s;
	double replicas;
};
struct fg_load_cost fg_load_cost(const struct fg_cost_model *cm, double req_per_s,
				 double prompt_tokens, double output_tokens);

/* What one context of `tokens` holds in KV. */
struct fg_context_cost {
	double kv_bytes;
	double kv_gib;
	double kv_bytes_per_gpu;
	double pool_share;
};
struct fg_context_cost fg_context_cost(const struct fg_cost_model *cm, double tokens);

/* Tenant quota from a replica count. */
static inline double fg_replicas_to_units(const struct fg_cost_model *cm, double replicas)
{
	return replicas * cm->replica_units_per_s;
}

#endif
