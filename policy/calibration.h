/* calibration.h — the engine's measured replica time: a fit of the prompt-
 * token time and the decode step over a sliding window of observations.
 *
 * The cost model (cost_model.c) prices from the policy's assumed MFU and
 * MBU. What a real engine takes differs (kernels, scheduling, sampling), so
 * the gateway keeps what it observed of the engine it fronts and fits
 *
 *   decode step = fixed + per_seq * batch + per_context * context
 *   TTFT        = lag + prompt_token * uncached
 *               + [others decoding] * (fixed + per_seq * others + per_context * their context)
 *
 * the second line being the mixed step a prompt joins when others are
 * decoding (vLLM runs the prefill chunk and their decode in one step). Each
 * fit is least squares with a ridge towards the policy's assumption worth
 * one observation (so a direction the data never varied, say the batch,
 * stays at the assumption instead of at noise), one pass of outlier
 * trimming, and a box around the assumption (FG_CALIB_BOX) so a sick
 * engine cannot make a price absurd. The result is a calibrated
 * `struct fg_cost_model` (fg_cost_model_calibrated): every price follows
 * from it with cost_model.c's formulas.
 *
 * Pure: the caller gives the clock.
 */
#ifndef FAIRGATE_CALIBRATION_H
#define FAIRGATE_CALIBRATION_H

#include <stdbool.h>
#include <stdint.h>

#include "cost_model.h"

#define FG_CALIB_WINDOW 4096          /* observations of each kind kept */
#define FG_CALIB_WINDOW_NS (300ull * 1000000000ull) /* and for at most 5 minutes */
#define FG_CALIB_MIN_DECODE 64        /* before a fit is reported */
#define FG_CALIB_MIN_PREFILL 16
#define FG_CALIB_BOX 8.0              /* a fitted term stays within 1/8x .. 8x the assumed */
#define FG_CALIB_MAX_STEP_S 10.0      /* a longer decode step is a stall, not a step */
#define FG_CALIB_MAX_TTFT_S 120.0

enum fg_calib_verdict {
	FG_CALIB_TAKEN = 0,
	FG_CALIB_BAD_NUMBER,  /* not finite, negative, zero duration */
	FG_CALIB_OUT_OF_RANGE /* a stall or an impossible batch/context */
};

struct fg_calib_decode_obs {
	uint64_t at_ns;
	double batch, context, step_s;
};

struct fg_calib_prefill_obs {
	uint64_t at_ns;
	double uncached, others, others_context, ttft_s;
};

struct fg_calib_fit {
	bool valid;                 /* enough of both kinds in the window */
	uint32_t n_decode, n_prefill;   /* used (after trimming) */
	uint32_t trimmed;           /* outliers dropped from this fit */
	bool bounded;               /* a term hit FG_CALIB_BOX */
	double prompt_token_s;
	double prefill_lag_s;       /* TTFT's constant: the network, the engine's queue */
	double step_fixed_s, step_per_seq_s, step_per_context_s;
	double decode_rms_s, prefill_rms_s;
	struct fg_cost_model cm;    /* the measured model (the assumed until valid) */
};

struct fg_calib {
	struct fg_cost_model assumed;
	struct fg_calib_decode_obs dec[FG_CALIB_WINDOW];
	struct fg_calib_prefill_obs pre[FG_CALIB_WINDOW];
	uint32_t dec_head, dec_len, pre_head, pre_len;
	uint64_t taken_decode, taken_prefill, rejected;
	struct fg_calib_fit fit;
};

void fg_calib_init(struct fg_calib *c, const struct fg_cost_model *assumed);
/* A new policy: the observations stay (the engine did not change). */
void fg_calib_set_assumed(struct fg_calib *c, const struct fg_cost_model *assumed);

/* One decode step: `batch` sequences holding `context` tokens of KV took
 * step_s. One prefill: `uncached` prompt tokens reached their first token
 * in ttft_s while `others` sequences holding `others_context` decoded. */
enum fg_calib_verdict fg_calib_add_decode(struct fg_calib *c, uint64_t now_ns, double batch,
					  double context, double step_s);
enum fg_calib_verdict fg_calib_add_prefill(struct fg_calib *c, uint64_t now_ns, double uncached,
					   double others, double others_context, double ttft_s);

/* Fit the window as of now_ns (older observations leave it). */
const struct fg_calib_fit *fg_calib_refit(struct fg_calib *c, uint64_t now_ns);

#endif
