/* calib_follow.h — the prices the gateway charges under
 * agent.calibration: on, moving from the policy's towards the measured.
 *
 * Three things set every price (cost_model.h): the prompt-token time (the
 * replica budget in units), and an output token's units at context 0 and
 * per token of context (t(0) and dt/dc over the prompt-token time). Each
 * follows the measurement as a ratio to the policy's, held within
 * FG_CALIB_FLOOR .. FG_CALIB_CEILING so a sick engine cannot zero or
 * explode anyone's price, and moving at most FG_CALIB_RATE_PER_MIN a
 * minute (geometrically) so a tenant's bill never jumps. Without a valid
 * fit the prices hold where they are, and so does a term the fit did not
 * identify (calibration.h: not measured to within FG_CALIB_MAX_REL_SE, or
 * held by its box; the KV term when contexts hardly varied apart from the
 * batch): it stays at the policy's, or at its last identified
 * measurement. A measured output weight
 * FG_CALIB_SHARP away from the last one reported is reported once
 * (the caller logs it).
 *
 * Pure: the caller gives the clock.
 */
#ifndef FAIRGATE_CALIB_FOLLOW_H
#define FAIRGATE_CALIB_FOLLOW_H

#include <stdbool.h>
#include <stdint.h>

#include "calibration.h"
#include "cost_model.h"

#define FG_CALIB_FLOOR 0.5
#define FG_CALIB_CEILING 2.0
#define FG_CALIB_RATE_PER_MIN 0.25 /* at most x1.25 (or /1.25) a minute */
#define FG_CALIB_SHARP 0.20

struct fg_calib_follow {
	struct fg_cost_model assumed;
	struct fg_cost_model applied;
	double scale[3];          /* applied / assumed: prompt time, t(0) units, dt/dc units */
	double reported_weight;   /* the output weight last reported as a sharp change */
	uint64_t last_ns;
};

void fg_calib_follow_init(struct fg_calib_follow *f, const struct fg_cost_model *assumed,
			  uint64_t now_ns);
/* A new policy: the ratios stay, applied to its prices. */
void fg_calib_follow_set_assumed(struct fg_calib_follow *f, const struct fg_cost_model *assumed);

/* Back to the policy's prices from now on (the sharp-change reference
 * stays): what advise charges, so that a later switch to `on` starts from
 * the prices charged, not from where an unused follow had got to. */
void fg_calib_follow_hold(struct fg_calib_follow *f, uint64_t now_ns);

/* Move the applied prices towards `fit` for the time since the last step.
 * True once for each sharp change of the measured output weight. */
bool fg_calib_follow_step(struct fg_calib_follow *f, const struct fg_calib_fit *fit,
			  uint64_t now_ns);

#endif
