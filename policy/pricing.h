/* pricing.h — what one inference request is expected to cost, and what it
 * is finally billed.
 *
 * Admission cannot tokenize cheaply (the engine owns the tokenizer), so a
 * prompt is estimated: its text at a chars-per-token ratio, plus what the
 * policy says the tokenizer adds (the chat template's tokens per message and
 * per request, a fixed count per image or audio part), plus token ids
 * counted exactly. When the estimate is near a limit the proxy asks the
 * engine's /tokenize, and the exact count replaces all of it.
 *
 * The ratio is learned per (tenant, model) from that tenant's own usage
 * only, starting from the model's prior (replica.model.chars_per_token), so
 * no tenant's traffic moves another tenant's estimates. It is bounded
 * ([FG_CPT_MIN, prior x FG_CPT_OVER_PRIOR]) and moves faster towards more
 * tokens than towards fewer: a tenant whose estimates come out low is soon
 * priced from its own history, and one that trains its ratio up gains at
 * most a factor of two on its reservations (settlement bills usage anyway).
 * Limits that refuse or route a request are checked against the larger of
 * the tenant's and the prior's token counts, and a hard bound (a token
 * covers at least one byte) says when a request certainly fits.
 *
 * Output is reserved in full (every sequence x its cap); the reservation is
 * priced with the cost model and settled on what the engine reports. Prices
 * always come from policy/cost_model (fg_metered_units): this file never
 * re-derives them. Per-tenant state is FG_CAL_SLOTS x 8 bytes.
 */
#ifndef FAIRGATE_PRICING_H
#define FAIRGATE_PRICING_H

#include <stdbool.h>
#include <stdint.h>
#include "cost_model.h"

#define FG_CPT_MIN 1.0            /* byte-level BPE: a token covers at least a byte */
#define FG_CPT_MAX 16.0
#define FG_CPT_OVER_PRIOR 2.0     /* a tenant's ratio stays within prior x this */
#define FG_CPT_STEP_UP 0.125      /* EWMA step towards fewer tokens per char */
#define FG_CPT_STEP_DOWN 0.25     /* towards more: low estimates are corrected faster */
#define FG_CAL_SLOTS 4            /* models learned per tenant */
#define FG_CAL_MODELS 255         /* model names the node tells apart */
#define FG_CAL_MODEL_MAX 64
/* Tokens a tokenizer may add beyond the policy's framing (BOS, a default
 * system line; per message, a template richer than the policy says): only
 * for the hard upper bound, which must hold even when the framing prior is
 * low. */
#define FG_PROMPT_SLACK 32
#define FG_MESSAGE_SLACK 8
/* Reserved output when neither the request nor the tier names a maximum. */
#define FG_FALLBACK_MAX_TOKENS 1024

/* Model names seen with usage, node-wide; an index is 1-based, 0 = none.
 * Only names are shared between tenants, never ratios. */
struct fg_cal_models {
	uint32_t n;
	char name[FG_CAL_MODELS][FG_CAL_MODEL_MAX];
};
int fg_cal_model_find(const struct fg_cal_models *m, const char *model);
/* Find or add; 0 when the table is full or the name too long. */
int fg_cal_model_add(struct fg_cal_models *m, const char *model);

struct fg_cal_slot {
	float chars_per_token;
	uint16_t samples;          /* saturates */
	uint8_t model;             /* fg_cal_models index; 0 = free slot */
	uint8_t unused;
};

/* One tenant's learned ratios (zeroed = the prior for every model). */
struct fg_calibration {
	struct fg_cal_slot s[FG_CAL_SLOTS];
};

void fg_calibration_init(struct fg_calibration *c);
/* The tenant's ratio for `model` (an fg_cal_models index), else `prior`. */
double fg_chars_per_token(const struct fg_calibration *c, int model, double prior);
/* One observation of this tenant: `chars` of text were `text_tokens`
 * tokens (its prompt less the framing, media and token ids). A new model
 * takes the slot with the fewest samples. */
void fg_calibration_learn(struct fg_calibration *c, int model, double prior, uint64_t chars,
			  double text_tokens);

/* What admission knows about a request before it runs. */
struct fg_request_shape {
	uint64_t prompt_chars;     /* text the tokenizer will see, all prompts */
	uint64_t prompt_token_ids; /* prompts given as token ids: counted exactly */
	uint32_t prompts;          /* sequences per choice (a completions prompt array); 0 = 1 */
	uint64_t longest_chars;    /* of the longest prompt (prompts > 1) */
	uint64_t longest_token_ids;
	uint32_t messages;         /* chat messages / responses input items */
	bool chat;                 /* a chat template frames it (reply tokens once) */
	uint32_t images, audios;   /* media parts: the policy's fixed count each */
	uint32_t n;                /* choices; 0 is read as 1 */
	uint64_t max_tokens;       /* the client's output cap; 0 = absent */
	bool prompt_only;          /* embeddings and the like: no output reserved */
	bool no_gpu;               /* /tokenize, /detokenize: priced as prefix-cache hits */
	double fixed_units;        /* > 0: agent.passthrough's price, nothing estimated */
	uint64_t exact_prompt_tokens; /* the engine's own count of the prompt; 0 = unknown */
};

/* The prompt, estimated (or exact). "longest" is the longest sequence's
 * prompt (what a context limit sees), the others cover every sequence (what
 * the price and the KV reservation see). */
struct fg_prompt_est {
	double tokens, longest;          /* at the tenant's ratio: the price */
	double tokens_safe, longest_safe;/* at min(tenant, prior) ratio: limits, KV */
	double tokens_max, longest_max;  /* the most its bytes can make: "certainly fits" */
	double fixed;                    /* framing + media + token ids, all sequences */
	bool exact;
};
struct fg_prompt_est fg_estimate_prompt(const struct fg_model *rule, double cpt,
					const struct fg_request_shape *s);
/* Its tokens_max alone (every sequence): the most tokens the request's
 * bytes, ids, media and framing can make, for a cheap screen. */
double fg_prompt_bound(const struct fg_model *rule, const struct fg_request_shape *s);

struct fg_price {
	double prompt_tokens;      /* estimated, all sequences */
	double output_tokens;      /* reserved: sequences x per_choice */
	double units;              /* reservation */
	uint64_t per_choice;       /* each sequence's output cap: written into the forwarded body */
	uint32_t sequences;        /* prompts x n: the output is split over them */
	uint32_t prompts;          /* distinct prompts (a completions prompt array) */
	double prompt_ceiling;     /* the most prompt tokens the engine can honestly report */
	bool flat;                 /* billed at the reservation whatever the usage */
};

/* `room`: the most output one sequence can take (context limit less the
 * longest prompt); a request naming no cap gets min(tier default, room). */
struct fg_price fg_price_request(const struct fg_cost_model *cm, enum fg_metering mode,
				 const struct fg_prompt_est *prompt,
				 const struct fg_request_shape *shape,
				 uint32_t tier_default_max_tokens, uint64_t room);

/* The engine's tokenizer counting `tokens` (a /tokenize call, the
 * tenant's own or the gateway's exact count near a limit): it runs on the
 * engine's CPU, so it is priced like prompt tokens served from the prefix
 * cache, never free. */
double fg_price_tokenizer(const struct fg_cost_model *cm, enum fg_metering mode, double tokens);

/* What the engine reported for a finished (or cut short) request. */
struct fg_usage {
	double prompt_tokens;
	double cached_tokens;
	double completion_tokens;
};

/* Units billed: the tenant pays for what it asked for and received, so
 * completion is capped at the reserved output (an engine that recomputes a
 * preempted sequence or overshoots is the platform's cost) and the prompt
 * at what the request's bytes can make (above it the engine is broken).
 * Usage sums the completion over the sequences; under context pricing it is
 * split equally over reserved->sequences, which errs low (fg_output_units). */
double fg_settle_units(const struct fg_cost_model *cm, enum fg_metering mode,
		       const struct fg_price *reserved, const struct fg_usage *u);

#endif
