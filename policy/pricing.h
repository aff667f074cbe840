/* pricing.h — what one inference request is expected to cost, and what it
 * is finally billed.
 *
 * Admission cannot tokenize (the engine owns the tokenizer), so the prompt is
 * estimated from its text length with a chars-per-token ratio learned per
 * model from the engine's own usage.prompt_tokens. The ratio starts at 4,
 * moves by a small step per observation and stays within [1, 16], so one odd
 * request cannot swing admission. Output is reserved in full (n x the
 * requested maximum, or the tier's default); the reservation is priced with
 * the cost model and settled later on what the engine reports.
 *
 * Prices always come from policy/cost_model (fg_metered_units): this file
 * never re-derives them.
 */
#ifndef FAIRGATE_PRICING_H
#define FAIRGATE_PRICING_H

#include <stdbool.h>
#include <stdint.h>
#include "cost_model.h"

#define FG_CPT_INITIAL 4.0
#define FG_CPT_MIN 1.0
#define FG_CPT_MAX 16.0
#define FG_CPT_ALPHA 0.125        /* EWMA step per observation */
#define FG_CAL_MODELS 32          /* models calibrated separately; others share slot 0 */
#define FG_CAL_MODEL_MAX 64
/* Reserved output when neither the request nor the tier names a maximum. */
#define FG_FALLBACK_MAX_TOKENS 1024

struct fg_cal_entry {
	char model[FG_CAL_MODEL_MAX];
	double chars_per_token;
	uint64_t samples;
};

/* Slot 0 is the shared default ("" model); models enter on first usage. */
struct fg_calibration {
	uint32_t n;
	struct fg_cal_entry e[FG_CAL_MODELS];
};

void fg_calibration_init(struct fg_calibration *c);
double fg_chars_per_token(const struct fg_calibration *c, const char *model);
/* One observation: a prompt of `chars` characters was `prompt_tokens` tokens. */
void fg_calibration_learn(struct fg_calibration *c, const char *model, uint64_t chars,
			  uint64_t prompt_tokens);

/* What admission knows about a request before it runs. */
struct fg_request_shape {
	uint64_t prompt_chars;     /* text the tokenizer will see */
	uint64_t prompt_token_ids; /* prompt given as token ids: counted exactly */
	uint32_t n;                /* choices; 0 is read as 1 */
	uint64_t max_tokens;       /* max_completion_tokens or max_tokens; 0 = absent */
	bool prompt_only;          /* embeddings and the like: no output reserved */
};

struct fg_price {
	double prompt_tokens;      /* estimated */
	double output_tokens;      /* reserved: n x max */
	double choices;            /* n: sequences the output is split over */
	double units;              /* reservation */
};

struct fg_price fg_price_request(const struct fg_cost_model *cm, enum fg_metering mode,
				 const struct fg_calibration *cal, const char *model,
				 const struct fg_request_shape *shape,
				 uint32_t tier_default_max_tokens);

/* What the engine reported for a finished (or cut short) request. */
struct fg_usage {
	double prompt_tokens;
	double cached_tokens;
	double completion_tokens;
};

/* Units billed: the tenant pays for what it asked for and received, so
 * completion is capped at the reserved output (an engine that recomputes a
 * preempted sequence or overshoots is the platform's cost). Usage sums the
 * completion over the choices; under context pricing it is split equally
 * over reserved->choices, which errs low (fg_output_units). */
double fg_settle_units(const struct fg_cost_model *cm, enum fg_metering mode,
		       const struct fg_price *reserved, const struct fg_usage *u);

#endif
