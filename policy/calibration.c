/* calibration.c — see calibration.h. */
#include "calibration.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TERMS 4
#define TRIM_MADS 5.0   /* a residual past 5 MADs (~3.4 sigma) is not this engine's step */

struct lsq {
	double a[TERMS][TERMS], b[TERMS], xx[TERMS];
	double n; /* the weights' sum: observations' worth */
};

static void lsq_add(struct lsq *q, const double *x, double y, double w)
{
	for (uint32_t i = 0; i < TERMS; i++) {
		for (uint32_t j = 0; j < TERMS; j++)
			q->a[i][j] += w * x[i] * x[j];
		q->b[i] += w * x[i] * y;
		q->xx[i] += w * x[i] * x[i];
	}
	q->n += w;
}

/* The normal equations with the ridge: (X'X + L) beta = X'y + L prior,
 * L_jj one observation's worth of x_j^2 (its mean square, or `floor_sq`
 * when the data never had it). */
static void lsq_system(const struct lsq *q, const double *prior, const double *floor_sq,
		       double m[TERMS][TERMS], double *rhs)
{
	for (uint32_t i = 0; i < TERMS; i++) {
		double l = q->n ? q->xx[i] / q->n : 0;
		if (!(l > floor_sq[i]))
			l = floor_sq[i];
		for (uint32_t j = 0; j < TERMS; j++)
			m[i][j] = q->a[i][j] + (i == j ? l : 0);
		rhs[i] = q->b[i] + l * prior[i];
	}
}

/* m x = rhs by Gaussian elimination with partial pivoting; -1 if singular. */
static int solve(const double m_in[TERMS][TERMS], const double *rhs, double *x)
{
	double m[TERMS][TERMS + 1];

	for (uint32_t i = 0; i < TERMS; i++) {
		for (uint32_t j = 0; j < TERMS; j++)
			m[i][j] = m_in[i][j];
		m[i][TERMS] = rhs[i];
	}
	for (uint32_t col = 0; col < TERMS; col++) {
		uint32_t piv = col;
		for (uint32_t r = col + 1; r < TERMS; r++)
			if (fabs(m[r][col]) > fabs(m[piv][col]))
				piv = r;
		if (!(fabs(m[piv][col]) > 0))
			return -1;
		if (piv != col)
			for (uint32_t j = 0; j <= TERMS; j++) {
				double t = m[col][j];
				m[col][j] = m[piv][j];
				m[piv][j] = t;
			}
		for (uint32_t r = col + 1; r < TERMS; r++) {
			double f = m[r][col] / m[col][col];
			for (uint32_t j = col; j <= TERMS; j++)
				m[r][j] -= f * m[col][j];
		}
	}
	for (uint32_t i = TERMS; i-- > 0;) {
		double s = m[i][TERMS];
		for (uint32_t j = i + 1; j < TERMS; j++)
			s -= m[i][j] * x[j];
		x[i] = s / m[i][i];
		if (!isfinite(x[i]))
			return -1;
	}
	return 0;
}

static int lsq_solve(const struct lsq *q, const double *prior, const double *floor_sq,
		     double *beta)
{
	double m[TERMS][TERMS], rhs[TERMS];

	lsq_system(q, prior, floor_sq, m, rhs);
	return solve(m, rhs, beta);
}

/* Each term's standard error, robust to observations of unequal noise
 * and worth (HC0: A^-1 M A^-1 with M the sum of (w r)^2 x x' over the
 * observations used): a stream step and an engine interval differ in
 * both, and an interval's weight (INTERVAL_WORTH steps) is its worth
 * against the ridge, not a noise 25x smaller than its residual says.
 * A is the system with the ridge, or with `ridge` false the data's own:
 * where the observations moved a term only together with others (from
 * the histograms alone the KV is the batch times a steady per-sequence
 * figure) that system is singular or nearly so and the error large,
 * however firmly the ridge settles the split. */
static double lsq_std_error(const struct lsq *q, const double meat[TERMS][TERMS],
			    const double *prior, const double *floor_sq, bool ridge, uint32_t j)
{
	double m[TERMS][TERMS], rhs[TERMS], col[TERMS], e[TERMS] = { 0 };

	e[j] = 1;
	lsq_system(q, prior, floor_sq, m, rhs);
	if (solve(ridge ? (const double(*)[TERMS])m : (const double(*)[TERMS])q->a, e, col))
		return INFINITY;
	double v = 0;
	for (uint32_t a = 0; a < TERMS; a++)
		for (uint32_t b = 0; b < TERMS; b++)
			v += col[a] * meat[a][b] * col[b];
	return sqrt(fabs(v));
}

static double clampd(double v, double lo, double hi, bool *hit)
{
	if (v < lo) {
		*hit = true;
		return lo;
	}
	if (v > hi) {
		*hit = true;
		return hi;
	}
	return v;
}

/* Strictly inside: an estimate on its box's edge was held there. */
static bool inside_box(double v, double lo, double hi)
{
	return v > lo && v < hi;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

void fg_calib_init(struct fg_calib *c, const struct fg_cost_model *assumed)
{
	memset(c, 0, sizeof(*c));
	fg_calib_set_assumed(c, assumed);
}

void fg_calib_set_assumed(struct fg_calib *c, const struct fg_cost_model *assumed)
{
	c->assumed = *assumed;
	if (!c->fit.valid)
		c->fit.cm = *assumed;
}

static bool bad(double v)
{
	return !isfinite(v) || v < 0;
}

static enum fg_calib_verdict check_step(const struct fg_calib *c, double batch, double context,
				       double prefill_tokens, double step_s)
{
	if (bad(batch) || bad(context) || bad(prefill_tokens) || bad(step_s) || !(step_s > 0) ||
	    !(batch >= 1))
		return FG_CALIB_BAD_NUMBER;
	/* a longer step is a stall; more KV or prompt than the pool holds is
	 * the caller's bookkeeping gone wrong */
	double pool = c->assumed.kv_pool_tokens > 0 ? c->assumed.kv_pool_tokens : INFINITY;
	if (step_s > FG_CALIB_MAX_STEP_S || batch > 1e6 || context > 4 * pool ||
	    prefill_tokens > 4 * pool)
		return FG_CALIB_OUT_OF_RANGE;
	return FG_CALIB_TAKEN;
}

enum fg_calib_verdict fg_calib_add_step(struct fg_calib *c, uint64_t now_ns, double batch,
					double context, double prefill_tokens, double step_s)
{
	enum fg_calib_verdict v = check_step(c, batch, context, prefill_tokens, step_s);
	if (v != FG_CALIB_TAKEN) {
		c->rejected++;
		return v;
	}
	struct fg_calib_step *o = &c->win[(c->head + c->len) % FG_CALIB_WINDOW];
	if (c->len == FG_CALIB_WINDOW)
		c->head = (c->head + 1) % FG_CALIB_WINDOW;
	else
		c->len++;
	*o = (struct fg_calib_step){ now_ns, batch, context, prefill_tokens, step_s };
	c->taken++;
	return FG_CALIB_TAKEN;
}

enum fg_calib_verdict fg_calib_add_interval(struct fg_calib *c, uint64_t now_ns,
					    enum fg_calib_source src, double batch,
					    double context, double prefill_tokens, double step_s,
					    double unseen)
{
	enum fg_calib_verdict v = check_step(c, batch, context, prefill_tokens, step_s);
	if (v == FG_CALIB_TAKEN && src != FG_CALIB_SRC_ENGINE_DECODE &&
	    src != FG_CALIB_SRC_ENGINE_PREFILL)
		v = FG_CALIB_BAD_NUMBER;
	if (v != FG_CALIB_TAKEN) {
		c->irejected++;
		return v;
	}
	uint32_t at = (c->ihead + c->ilen) % FG_CALIB_IWINDOW;
	if (c->ilen == FG_CALIB_IWINDOW)
		c->ihead = (c->ihead + 1) % FG_CALIB_IWINDOW;
	else
		c->ilen++;
	c->iwin[at] = (struct fg_calib_step){ now_ns, batch, context, prefill_tokens, step_s };
	c->isrc[at] = (uint8_t)src;
	c->iunseen[at] = (float)(unseen >= 0 && unseen <= 1 ? unseen : unseen > 1 ? 1 : 0);
	c->itaken[src]++;
	return FG_CALIB_TAKEN;
}

void fg_calib_drop_intervals(struct fg_calib *c)
{
	c->ihead = c->ilen = 0;
}

static void drop_old(struct fg_calib *c, uint64_t now_ns)
{
	uint64_t horizon = now_ns > FG_CALIB_WINDOW_NS ? now_ns - FG_CALIB_WINDOW_NS : 0;

	while (c->len && c->win[c->head].at_ns < horizon) {
		c->head = (c->head + 1) % FG_CALIB_WINDOW;
		c->len--;
	}
	while (c->ilen && c->iwin[c->ihead].at_ns < horizon) {
		c->ihead = (c->ihead + 1) % FG_CALIB_IWINDOW;
		c->ilen--;
	}
}

/* Observation i of both windows (the streams' steps, then the engine's
 * intervals), its source and its weight. */
struct rows {
	const struct fg_calib *c;
	double w[FG_CALIB_SOURCES];
};

static const struct fg_calib_step *row_at(const struct rows *r, uint32_t i,
					  enum fg_calib_source *src)
{
	const struct fg_calib *c = r->c;

	if (i < c->len) {
		*src = FG_CALIB_SRC_STREAM;
		return &c->win[(c->head + i) % FG_CALIB_WINDOW];
	}
	uint32_t k = (c->ihead + i - c->len) % FG_CALIB_IWINDOW;
	*src = (enum fg_calib_source)c->isrc[k];
	return &c->iwin[k];
}

/* An engine interval is the mean of many steps: as the minimum of each
 * source is worth as much, one counts as this many steps (the ridge is
 * one step's worth, which must not outweigh a few dozen intervals). */
#define INTERVAL_WORTH ((double)FG_CALIB_MIN_STEPS / (2.0 * FG_CALIB_MIN_INTERVALS))

/* Each source's share of the fit: half, scaled down while it has fewer
 * observations than it would need alone, the histograms' also by the mean
 * share of their tokens the streams did not show, the two then
 * normalised; the observations of a source share its part of the total
 * worth. */
static void weigh(struct rows *r, uint32_t n_stream, uint32_t n_engine, double *share)
{
	const struct fg_calib *c = r->c;
	double unseen = 0;

	for (uint32_t i = 0; i < n_engine; i++)
		unseen += c->iunseen[(c->ihead + i) % FG_CALIB_IWINDOW];
	unseen = n_engine ? unseen / n_engine : 0;
	double s = 0.5 * fmin(1.0, (double)n_stream / FG_CALIB_MIN_STEPS);
	double e = 0.5 * fmin(1.0, (double)n_engine / (2.0 * FG_CALIB_MIN_INTERVALS)) * unseen;
	double total = n_stream + n_engine * INTERVAL_WORTH;

	share[0] = s + e > 0 ? s / (s + e) : 0;
	share[1] = s + e > 0 ? e / (s + e) : 0;
	r->w[FG_CALIB_SRC_STREAM] = n_stream ? share[0] * total / n_stream : 0;
	r->w[FG_CALIB_SRC_ENGINE_DECODE] = r->w[FG_CALIB_SRC_ENGINE_PREFILL] =
		n_engine ? share[1] * total / n_engine : 0;
}

static void row(const struct fg_calib_step *o, double *x)
{
	x[0] = 1;
	x[1] = o->batch;
	x[2] = o->context;
	x[3] = o->prefill_tokens;
}

static double predict(const double *beta, const double *x)
{
	double s = 0;

	for (int i = 0; i < TERMS; i++)
		s += beta[i] * x[i];
	return s;
}

/* scratch for residuals: one fit at a time (the gateway's loop thread) */
static double resid[FG_CALIB_WINDOW + FG_CALIB_IWINDOW];

/* Fit, trim past TRIM_MADS, fit again; the residuals' rms and counts into f. */
static int fit_window(const struct fg_calib *c, const double *prior, const double *floor_sq,
		      double *beta, struct fg_calib_fit *f)
{
	double x[TERMS], cut = INFINITY;
	struct lsq q;
	struct rows rs = { .c = c };
	uint32_t n = c->len + c->ilen;
	enum fg_calib_source src;

	weigh(&rs, c->len, c->ilen, f->weight_share);
	for (int pass = 0; pass < 2; pass++) {
		memset(&q, 0, sizeof(q));
		for (uint32_t i = 0; i < n; i++) {
			const struct fg_calib_step *o = row_at(&rs, i, &src);
			row(o, x);
			if (fabs(o->step_s - predict(beta, x)) <= cut)
				lsq_add(&q, x, o->step_s, rs.w[src]);
		}
		if (lsq_solve(&q, prior, floor_sq, beta))
			return -1;
		if (pass)
			break;
		for (uint32_t i = 0; i < n; i++) {
			const struct fg_calib_step *o = row_at(&rs, i, &src);
			row(o, x);
			resid[i] = fabs(o->step_s - predict(beta, x));
		}
		qsort(resid, n, sizeof(*resid), cmp_double);
		cut = TRIM_MADS * resid[n / 2];
	}
	double ss = 0, ws = 0, meat[TERMS][TERMS] = { { 0 } };
	f->n_steps = f->n_prefill_steps = 0;
	memset(f->used, 0, sizeof(f->used));
	for (uint32_t i = 0; i < n; i++) {
		const struct fg_calib_step *o = row_at(&rs, i, &src);
		row(o, x);
		double r = o->step_s - predict(beta, x);
		if (fabs(r) > cut)
			continue;
		ss += rs.w[src] * r * r;
		ws += rs.w[src];
		for (uint32_t a = 0; a < TERMS; a++)
			for (uint32_t b = 0; b < TERMS; b++)
				meat[a][b] += rs.w[src] * rs.w[src] * r * r * x[a] * x[b];
		f->used[src]++;
		if (src == FG_CALIB_SRC_STREAM) {
			f->n_steps++;
			f->n_prefill_steps += o->prefill_tokens > 0;
		}
	}
	f->trimmed = n - f->n_steps - f->used[FG_CALIB_SRC_ENGINE_DECODE] -
		     f->used[FG_CALIB_SRC_ENGINE_PREFILL];
	f->rms_s = ws > 0 ? sqrt(ss / ws) : 0;
	f->step_fixed_se_s = lsq_std_error(&q, meat, prior, floor_sq, true, 0);
	f->step_per_seq_se_s = lsq_std_error(&q, meat, prior, floor_sq, true, 1);
	/* the KV term is judged by what the data say of it (its split from the
	 * per-sequence term is the one the histograms cannot make) */
	f->step_per_context_se_s = lsq_std_error(&q, meat, prior, floor_sq, false, 2);
	f->prompt_token_se_s = lsq_std_error(&q, meat, prior, floor_sq, true, 3);
	return 0;
}

const struct fg_calib_fit *fg_calib_refit(struct fg_calib *c, uint64_t now_ns)
{
	const struct fg_cost_model *a = &c->assumed;
	struct fg_calib_fit f = { 0 };
	double gpus = a->gpus ? a->gpus : 1;
	double batch = a->ref_batch ? a->ref_batch : 1;
	double ctx = batch * (a->ref_context ? a->ref_context : 1);
	/* the assumption: no overheads, the weights and KV read at the
	 * policy's MBU, prompts at its MFU */
	double fixed0 = fg_decode_step_batch_s(a, 0, 0);
	double per_ctx0 = a->kv_bytes_per_token / gpus / a->hbm_effective_per_gpu;
	double prior[TERMS] = { fixed0, 0, per_ctx0, a->prompt_token_s };
	double floor_sq[TERMS] = { 1e-6, 1e-6 * batch * batch, 1e-6 * ctx * ctx,
				   1e-6 * (double)a->ref_context * a->ref_context };
	double beta[TERMS] = { fixed0, 0, per_ctx0, a->prompt_token_s };
	uint32_t prefilled = 0, intervals[FG_CALIB_SOURCES] = { 0 };

	drop_old(c, now_ns);
	for (uint32_t i = 0; i < c->len; i++)
		prefilled += c->win[(c->head + i) % FG_CALIB_WINDOW].prefill_tokens > 0;
	for (uint32_t i = 0; i < c->ilen; i++)
		intervals[c->isrc[(c->ihead + i) % FG_CALIB_IWINDOW]]++;
	bool streams_fit = c->len >= FG_CALIB_MIN_STEPS && prefilled >= FG_CALIB_MIN_PREFILLS;
	bool engine_fits = intervals[FG_CALIB_SRC_ENGINE_DECODE] >= FG_CALIB_MIN_INTERVALS &&
			   intervals[FG_CALIB_SRC_ENGINE_PREFILL] >= FG_CALIB_MIN_INTERVALS;
	f.cm = *a;
	if ((!streams_fit && !engine_fits) || fit_window(c, prior, floor_sq, beta, &f)) {
		f.n_steps = c->len;
		f.n_prefill_steps = prefilled;
		f.used[FG_CALIB_SRC_STREAM] = c->len;
		f.used[FG_CALIB_SRC_ENGINE_DECODE] = intervals[FG_CALIB_SRC_ENGINE_DECODE];
		f.used[FG_CALIB_SRC_ENGINE_PREFILL] = intervals[FG_CALIB_SRC_ENGINE_PREFILL];
		c->fit = f;
		return &c->fit;
	}
	/* the box: each term within 1/BOX .. BOX of the assumption's scale
	 * (the per-sequence part as a share of the fixed one) */
	const double lo[TERMS] = { fixed0 / FG_CALIB_BOX, -fixed0 / batch, per_ctx0 / FG_CALIB_BOX,
				   a->prompt_token_s / FG_CALIB_BOX };
	const double hi[TERMS] = { fixed0 * FG_CALIB_BOX, fixed0 * FG_CALIB_BOX / batch,
				   per_ctx0 * FG_CALIB_BOX, a->prompt_token_s * FG_CALIB_BOX };
	/* A KV term not measured within FG_CALIB_MAX_REL_SE, or measured on
	 * or past its box (where a direction the data never varied apart
	 * from the batch lands), is pinned at the policy's and the rest
	 * fitted again: noise in it would otherwise move the price at the
	 * reference context, which it holds. */
	f.context_identified = f.step_per_context_se_s <= FG_CALIB_MAX_REL_SE * fabs(beta[2]) &&
			       inside_box(beta[2], lo[2], hi[2]);
	/* So is the per-sequence term when its part of the reference step is
	 * not measured within FG_CALIB_MAX_REL_SE of that step's fixed and
	 * per-sequence part (a batch that hardly varied: its slope would
	 * otherwise carry the noise to the reference batch); pinned, the
	 * fixed term takes the step at the batch seen. */
	f.per_seq_identified = f.step_per_seq_se_s * batch <=
			       FG_CALIB_MAX_REL_SE * fabs(beta[0] + beta[1] * batch);
	double se_ctx = f.step_per_context_se_s, se_seq = f.step_per_seq_se_s;
	if (!f.context_identified || !f.per_seq_identified) {
		struct fg_calib_fit pinned = f;
		double b2[TERMS] = { fixed0, 0, per_ctx0, a->prompt_token_s };
		if (!f.context_identified)
			floor_sq[2] = 1e12 * ctx * ctx;
		if (!f.per_seq_identified)
			floor_sq[1] = 1e12 * batch * batch;
		if (!fit_window(c, prior, floor_sq, b2, &pinned)) {
			memcpy(beta, b2, sizeof(b2));
			pinned.context_identified = f.context_identified;
			pinned.per_seq_identified = f.per_seq_identified;
			f = pinned;
			/* the unpinned fit's, as measured */
			f.step_per_context_se_s = se_ctx;
			f.step_per_seq_se_s = se_seq;
		}
	}
	/* A term the box held is not measured, only bounded: its price holds
	 * (calib_follow.c) however small its standard error. */
	bool hit[TERMS] = { false };
	f.step_fixed_s = clampd(beta[0], lo[0], hi[0], &hit[0]);
	f.step_per_seq_s = clampd(beta[1], lo[1], hi[1], &hit[1]);
	f.step_per_context_s = clampd(beta[2], lo[2], hi[2], &hit[2]);
	f.prompt_token_s = clampd(beta[3], lo[3], hi[3], &hit[3]);
	/* a step of the reference batch must still take time */
	if (f.step_fixed_s + f.step_per_seq_s * batch < fixed0 / FG_CALIB_BOX) {
		f.step_per_seq_s = (fixed0 / FG_CALIB_BOX - f.step_fixed_s) / batch;
		hit[1] = true;
	}
	f.bounded = hit[0] || hit[1] || hit[2] || hit[3];
	f.valid = true;
	f.prompt_identified =
		f.prompt_token_se_s <= FG_CALIB_MAX_REL_SE * f.prompt_token_s && !hit[3];
	f.step_identified = !hit[0] && !hit[1];
	f.per_seq_identified = f.per_seq_identified && !hit[1];
	/* pinned at the policy's, the KV term sits inside its box: unpinned,
	 * it was identified only if the box did not hold it */
	f.context_identified = f.context_identified && !hit[2];
	fg_cost_model_calibrated(&f.cm, a, f.prompt_token_s, f.step_fixed_s, f.step_per_seq_s,
				 f.step_per_context_s);
	c->fit = f;
	return &c->fit;
}
