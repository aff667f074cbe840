/* calib_follow.c — see calib_follow.h. */
#include "calib_follow.h"

#include <math.h>
#include <string.h>

/* The three priced quantities of a model, in the order of f->scale. */
static void priced(const struct fg_cost_model *cm, double *q)
{
	q[0] = cm->prompt_token_s;
	q[1] = cm->output_weights_share_s / cm->prompt_token_s;
	q[2] = cm->output_s_per_context / cm->prompt_token_s;
}

static void rebuild(struct fg_calib_follow *f, double seq_overhead_s)
{
	double q[3];

	priced(&f->assumed, q);
	double prompt_s = q[0] * f->scale[0];
	fg_cost_model_priced(&f->applied, &f->assumed, prompt_s, q[1] * f->scale[1] * prompt_s,
			     q[2] * f->scale[2] * prompt_s, seq_overhead_s);
}

void fg_calib_follow_init(struct fg_calib_follow *f, const struct fg_cost_model *assumed,
			  uint64_t now_ns)
{
	memset(f, 0, sizeof(*f));
	f->scale[0] = f->scale[1] = f->scale[2] = 1;
	f->last_ns = now_ns;
	f->assumed = *assumed;
	f->applied = *assumed;
	f->reported_weight = assumed->output_weight;
}

void fg_calib_follow_hold(struct fg_calib_follow *f, uint64_t now_ns)
{
	f->scale[0] = f->scale[1] = f->scale[2] = 1;
	f->applied = f->assumed;
	f->last_ns = now_ns;
}

void fg_calib_follow_set_assumed(struct fg_calib_follow *f, const struct fg_cost_model *assumed)
{
	double seq = f->applied.seq_overhead_s;

	f->assumed = *assumed;
	rebuild(f, seq);
}

bool fg_calib_follow_step(struct fg_calib_follow *f, const struct fg_calib_fit *fit,
			  uint64_t now_ns)
{
	double dt = now_ns > f->last_ns ? (double)(now_ns - f->last_ns) / 1e9 : 0;
	bool sharp = false;

	f->last_ns = now_ns;
	if (!fit->valid)
		return false; /* hold: no measurement is no reason to move */
	double want[3], have[3];
	priced(&fit->cm, want);
	priced(&f->assumed, have);
	double step = log1p(FG_CALIB_RATE_PER_MIN) * fmin(dt, 3600) / 60;
	/* a term not identified holds where it is (the policy's, or the
	 * last identified measurement): the prompt time sets all three, the
	 * fixed and per-sequence terms the second, the KV term the third */
	bool measured[3] = { fit->prompt_identified,
			     fit->prompt_identified && fit->step_identified,
			     fit->prompt_identified && fit->context_identified };
	for (int i = 0; i < 3; i++) {
		double target = want[i] / have[i];
		if (!isfinite(target) || !measured[i])
			continue;
		target = fmin(fmax(target, FG_CALIB_FLOOR), FG_CALIB_CEILING);
		double d = log(target) - log(f->scale[i]);
		f->scale[i] *= exp(fmin(fmax(d, -step), step));
	}
	rebuild(f, fit->cm.seq_overhead_s);
	double w = fit->cm.output_weight;
	if (f->reported_weight > 0 && fabs(w / f->reported_weight - 1) > FG_CALIB_SHARP) {
		f->reported_weight = w;
		sharp = true;
	}
	return sharp;
}
