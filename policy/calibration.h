/* calibration.h — the engine's measured replica time: a fit of the engine
 * step over a sliding window of observed steps.
 *
 * The cost model (cost_model.c) prices from the policy's assumed MFU and
 * MBU. What a real engine takes differs (kernels, scheduling, sampling), so
 * the gateway keeps the engine steps it observed (agent/proxy/
 * calib_observer.c: the batch it had decoding, their KV, and the prompt
 * tokens prefilled in the same step, vLLM running a prefill chunk and the
 * batch's decode as one step) and fits
 *
 *   step = fixed + per_seq * batch + per_context * context
 *        + prompt_token * prefill_tokens
 *
 * by least squares with a ridge towards the policy's assumption worth one
 * observation (so a direction the data never varied, say the batch, stays
 * at the assumption instead of at noise), one pass of outlier trimming, and
 * a box around the assumption (FG_CALIB_BOX) so a sick engine cannot make a
 * price absurd. Standard errors are robust (HC0); the per-context and
 * per-sequence terms not measured within FG_CALIB_MAX_REL_SE are pinned
 * at the policy's and the rest fitted again, and a term the box held is
 * not identified (fg_calib_fit's *_identified: only those are followed). The result is a calibrated `struct fg_cost_model`
 * (fg_cost_model_calibrated): every price follows from it with
 * cost_model.c's formulas.
 *
 * A second source feeds the same fit: the engine's own timing histograms
 * read between two scrapes (policy/calib_hist.c), each interval a mean
 * step (fg_calib_add_interval) of the mean batch, context and prefill of
 * the steps it covers. It sees what the streams cannot (non-streamed
 * traffic). Neither source can swamp the other: each carries at most half
 * the fit's weight, and less while it has fewer observations than it
 * needs on its own to fit (FG_CALIB_MIN_STEPS, FG_CALIB_MIN_INTERVALS);
 * the histograms' half is scaled by the share of the engine's tokens the
 * streams did not show (the same steps must not count twice).
 *
 * Pure: the caller gives the clock.
 */
#ifndef FAIRGATE_CALIBRATION_H
#define FAIRGATE_CALIBRATION_H

#include <stdbool.h>
#include <stdint.h>

#include "cost_model.h"

#define FG_CALIB_WINDOW 4096          /* steps kept */
#define FG_CALIB_WINDOW_NS (300ull * 1000000000ull) /* and for at most 5 minutes */
#define FG_CALIB_MIN_STEPS 256        /* before a fit is reported */
#define FG_CALIB_MIN_PREFILLS 32      /* of which steps that prefilled */
#define FG_CALIB_BOX 8.0              /* a fitted term stays within 1/8x .. 8x the assumed */
#define FG_CALIB_MAX_STEP_S 10.0      /* a longer step is a stall, not a step */
/* A term whose standard error is above this share of its value is not
 * measured well enough to price by (calib_follow.c holds it). */
#define FG_CALIB_MAX_REL_SE 0.10
#define FG_CALIB_IWINDOW 512          /* engine-histogram intervals kept (same 5 minutes) */
/* of each kind (decode, prefill) before the histograms alone are a fit */
#define FG_CALIB_MIN_INTERVALS 5

/* Where an observation came from, as status and metrics count them. */
enum fg_calib_source {
	FG_CALIB_SRC_STREAM = 0,     /* a step seen in the relayed streams */
	FG_CALIB_SRC_ENGINE_DECODE,  /* an interval's mean inter-token time */
	FG_CALIB_SRC_ENGINE_PREFILL, /* an interval's mean prefill time */
	FG_CALIB_SOURCES
};

enum fg_calib_verdict {
	FG_CALIB_TAKEN = 0,
	FG_CALIB_BAD_NUMBER,  /* not finite, negative, zero duration, no batch */
	FG_CALIB_OUT_OF_RANGE /* a stall, or more KV or prompt than the pool holds */
};

struct fg_calib_step {
	uint64_t at_ns;
	double batch, context, prefill_tokens, step_s;
};

struct fg_calib_fit {
	bool valid;                 /* enough steps, and enough that prefilled */
	bool bounded;               /* a term hit FG_CALIB_BOX */
	uint32_t n_steps, n_prefill_steps; /* used (after trimming) */
	uint32_t trimmed;           /* outliers dropped from this fit */
	uint32_t used[FG_CALIB_SOURCES]; /* observations used, by source (after trimming) */
	double weight_share[2];     /* of the fit's weight: the streams', the engine's */
	double prompt_token_s;
	double step_fixed_s, step_per_seq_s, step_per_context_s;
	double rms_s;               /* of the residuals used */
	double prompt_token_se_s, step_fixed_se_s, step_per_seq_se_s, step_per_context_se_s;
	/* A term is identified (measured, so priced by: calib_follow.c) when
	 * its standard error is within FG_CALIB_MAX_REL_SE of it and the box
	 * did not hold it (an estimate on or past FG_CALIB_BOX is bounded,
	 * not measured). The KV term when contexts hardly vary apart from
	 * the batch (the histograms alone) is not, and the fit pins it at
	 * the policy's (its standard error stays the unpinned fit's). */
	bool context_identified;
	bool prompt_identified;     /* the prompt-token time */
	bool step_identified;       /* the fixed and per-sequence terms: t(0) */
	/* the per-sequence term apart from the fixed one: when the batch
	 * hardly varied it is not, and the fit pins it at the policy's (0;
	 * t(0) is then the step at the batch seen, still identified) */
	bool per_seq_identified;
	struct fg_cost_model cm;    /* the measured model (the assumed until valid) */
};

struct fg_calib {
	struct fg_cost_model assumed;
	struct fg_calib_step win[FG_CALIB_WINDOW];
	uint32_t head, len;
	uint64_t taken, rejected;
	/* the engine-histogram intervals, the second source */
	struct fg_calib_step iwin[FG_CALIB_IWINDOW];
	uint8_t isrc[FG_CALIB_IWINDOW]; /* enum fg_calib_source of each */
	float iunseen[FG_CALIB_IWINDOW]; /* of each: the share of its tokens no stream showed */
	uint32_t ihead, ilen;
	uint64_t itaken[FG_CALIB_SOURCES], irejected;
	struct fg_calib_fit fit;
};

void fg_calib_init(struct fg_calib *c, const struct fg_cost_model *assumed);
/* A new policy: the observations stay (the engine did not change). */
void fg_calib_set_assumed(struct fg_calib *c, const struct fg_cost_model *assumed);

/* One engine step: `batch` sequences decoding, holding `context` tokens of
 * KV between them, and `prefill_tokens` uncached prompt tokens computed
 * beside them, took step_s. */
enum fg_calib_verdict fg_calib_add_step(struct fg_calib *c, uint64_t now_ns, double batch,
					double context, double prefill_tokens, double step_s);

/* One engine-histogram interval (FG_CALIB_SRC_ENGINE_*): its steps took
 * step_s on average, with `batch` sequences, `context` KV tokens between
 * them and `prefill_tokens` uncached prompt tokens each; `unseen` (0..1)
 * is the share of its output tokens that no relayed stream showed. The
 * streams' steps are the same steps, seen one by one, so an interval
 * weighs in only for what they missed (a stream-only load is fitted from
 * the streams; a load of non-streamed requests from the histograms). The
 * same checks as a step. */
enum fg_calib_verdict fg_calib_add_interval(struct fg_calib *c, uint64_t now_ns,
					    enum fg_calib_source src, double batch,
					    double context, double prefill_tokens, double step_s,
					    double unseen);

/* The engine intervals leave the window (they were on another clock). */
void fg_calib_drop_intervals(struct fg_calib *c);

/* Fit the window as of now_ns (older steps leave it). */
const struct fg_calib_fit *fg_calib_refit(struct fg_calib *c, uint64_t now_ns);

#endif
