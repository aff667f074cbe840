/* calibration.c — see calibration.h. */
#include "calibration.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TERMS 3
#define TRIM_MADS 5.0   /* a residual past 5 MADs (~3.4 sigma) is not this engine's step */
#define MIX_PRIOR 1.5   /* TTFT carries the mixed step once, and half a step of waiting */

struct lsq {
	double a[MAX_TERMS][MAX_TERMS], b[MAX_TERMS], xx[MAX_TERMS];
	uint32_t d, n;
};

static void lsq_add(struct lsq *q, const double *x, double y)
{
	for (uint32_t i = 0; i < q->d; i++) {
		for (uint32_t j = 0; j < q->d; j++)
			q->a[i][j] += x[i] * x[j];
		q->b[i] += x[i] * y;
		q->xx[i] += x[i] * x[i];
	}
	q->n++;
}

/* (X'X + L) beta = X'y + L prior, L_jj one observation's worth of x_j^2
 * (its mean square, or `floor_sq` when the data never had it). Gaussian
 * elimination with partial pivoting; -1 if singular even so. */
static int lsq_solve(struct lsq *q, const double *prior, const double *floor_sq, double *beta)
{
	double m[MAX_TERMS][MAX_TERMS + 1];
	uint32_t d = q->d;

	for (uint32_t i = 0; i < d; i++) {
		double l = q->n ? q->xx[i] / q->n : 0;
		if (!(l > floor_sq[i]))
			l = floor_sq[i];
		for (uint32_t j = 0; j < d; j++)
			m[i][j] = q->a[i][j] + (i == j ? l : 0);
		m[i][d] = q->b[i] + l * prior[i];
	}
	for (uint32_t col = 0; col < d; col++) {
		uint32_t piv = col;
		for (uint32_t r = col + 1; r < d; r++)
			if (fabs(m[r][col]) > fabs(m[piv][col]))
				piv = r;
		if (!(fabs(m[piv][col]) > 0))
			return -1;
		if (piv != col)
			for (uint32_t j = 0; j <= d; j++) {
				double t = m[col][j];
				m[col][j] = m[piv][j];
				m[piv][j] = t;
			}
		for (uint32_t r = col + 1; r < d; r++) {
			double f = m[r][col] / m[col][col];
			for (uint32_t j = col; j <= d; j++)
				m[r][j] -= f * m[col][j];
		}
	}
	for (uint32_t i = d; i-- > 0;) {
		double s = m[i][d];
		for (uint32_t j = i + 1; j < d; j++)
			s -= m[i][j] * beta[j];
		beta[i] = s / m[i][i];
		if (!isfinite(beta[i]))
			return -1;
	}
	return 0;
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

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The median absolute residual (sorts r; at most FG_CALIB_WINDOW, once a
 * second). */
static double median_abs(double *r, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		r[i] = fabs(r[i]);
	qsort(r, n, sizeof(*r), cmp_double);
	return n ? r[n / 2] : 0;
}

void fg_calib_init(struct fg_calib *c, const struct fg_cost_model *assumed)
{
	memset(c, 0, sizeof(*c));
	fg_calib_set_assumed(c, assumed);
}

void fg_calib_set_assumed(struct fg_calib *c, const struct fg_cost_model *assumed)
{
	c->assumed = *assumed;
	c->fit.cm = *assumed;
}

static bool bad(double v)
{
	return !isfinite(v) || v < 0;
}

enum fg_calib_verdict fg_calib_add_decode(struct fg_calib *c, uint64_t now_ns, double batch,
					  double context, double step_s)
{
	if (bad(batch) || bad(context) || bad(step_s) || !(step_s > 0) || !(batch >= 1)) {
		c->rejected++;
		return FG_CALIB_BAD_NUMBER;
	}
	/* a step longer than FG_CALIB_MAX_STEP_S is a stall; a context beyond
	 * what the pool holds is the caller's bookkeeping gone wrong */
	if (step_s > FG_CALIB_MAX_STEP_S || batch > 1e6 ||
	    (c->assumed.kv_pool_tokens > 0 && context > 4 * c->assumed.kv_pool_tokens)) {
		c->rejected++;
		return FG_CALIB_OUT_OF_RANGE;
	}
	struct fg_calib_decode_obs *o = &c->dec[(c->dec_head + c->dec_len) % FG_CALIB_WINDOW];
	if (c->dec_len == FG_CALIB_WINDOW)
		c->dec_head = (c->dec_head + 1) % FG_CALIB_WINDOW;
	else
		c->dec_len++;
	*o = (struct fg_calib_decode_obs){ now_ns, batch, context, step_s };
	c->taken_decode++;
	return FG_CALIB_TAKEN;
}

enum fg_calib_verdict fg_calib_add_prefill(struct fg_calib *c, uint64_t now_ns, double uncached,
					   double others, double others_context, double ttft_s)
{
	if (bad(uncached) || bad(others) || bad(others_context) || bad(ttft_s) || !(ttft_s > 0) ||
	    !(uncached >= 1)) {
		c->rejected++;
		return FG_CALIB_BAD_NUMBER;
	}
	if (ttft_s > FG_CALIB_MAX_TTFT_S || others > 1e6 ||
	    (c->assumed.kv_pool_tokens > 0 &&
	     (uncached > 4 * c->assumed.kv_pool_tokens ||
	      others_context > 4 * c->assumed.kv_pool_tokens))) {
		c->rejected++;
		return FG_CALIB_OUT_OF_RANGE;
	}
	struct fg_calib_prefill_obs *o = &c->pre[(c->pre_head + c->pre_len) % FG_CALIB_WINDOW];
	if (c->pre_len == FG_CALIB_WINDOW)
		c->pre_head = (c->pre_head + 1) % FG_CALIB_WINDOW;
	else
		c->pre_len++;
	*o = (struct fg_calib_prefill_obs){ now_ns, uncached, others, others_context, ttft_s };
	c->taken_prefill++;
	return FG_CALIB_TAKEN;
}

static void drop_old(struct fg_calib *c, uint64_t now_ns)
{
	uint64_t horizon = now_ns > FG_CALIB_WINDOW_NS ? now_ns - FG_CALIB_WINDOW_NS : 0;

	while (c->dec_len && c->dec[c->dec_head].at_ns < horizon) {
		c->dec_head = (c->dec_head + 1) % FG_CALIB_WINDOW;
		c->dec_len--;
	}
	while (c->pre_len && c->pre[c->pre_head].at_ns < horizon) {
		c->pre_head = (c->pre_head + 1) % FG_CALIB_WINDOW;
		c->pre_len--;
	}
}

static void decode_row(const struct fg_calib_decode_obs *o, double *x)
{
	x[0] = 1;
	x[1] = o->batch;
	x[2] = o->context;
}

static double step_of(const double *beta, double batch, double context)
{
	return beta[0] + beta[1] * batch + beta[2] * context;
}

static void prefill_row(const struct fg_calib_prefill_obs *o, const double *step, double *x)
{
	x[0] = 1;
	x[1] = o->uncached;
	x[2] = o->others > 0 ? step_of(step, o->others, o->others_context) : 0;
}

/* scratch for residuals: one fit at a time (the gateway's loop thread) */
static double resid[FG_CALIB_WINDOW];

static int fit_decode(const struct fg_calib *c, const double *prior, const double *floor_sq,
		      double *beta, struct fg_calib_fit *f)
{
	struct lsq q = { .d = 3 };
	double x[3], cut = INFINITY;

	for (int pass = 0; pass < 2; pass++) {
		memset(&q, 0, sizeof(q));
		q.d = 3;
		for (uint32_t i = 0; i < c->dec_len; i++) {
			const struct fg_calib_decode_obs *o = &c->dec[(c->dec_head + i) % FG_CALIB_WINDOW];
			decode_row(o, x);
			double y = o->step_s;
			if (pass && fabs(y - step_of(beta, o->batch, o->context)) > cut)
				continue;
			lsq_add(&q, x, y);
		}
		if (lsq_solve(&q, prior, floor_sq, beta))
			return -1;
		if (pass)
			break;
		for (uint32_t i = 0; i < c->dec_len; i++) {
			const struct fg_calib_decode_obs *o = &c->dec[(c->dec_head + i) % FG_CALIB_WINDOW];
			resid[i] = o->step_s - step_of(beta, o->batch, o->context);
		}
		cut = TRIM_MADS * median_abs(resid, c->dec_len);
	}
	double ss = 0;
	uint32_t n = 0;
	for (uint32_t i = 0; i < c->dec_len; i++) {
		const struct fg_calib_decode_obs *o = &c->dec[(c->dec_head + i) % FG_CALIB_WINDOW];
		double r = o->step_s - step_of(beta, o->batch, o->context);
		if (fabs(r) > cut)
			continue;
		ss += r * r;
		n++;
	}
	f->n_decode = n;
	f->trimmed += c->dec_len - n;
	f->decode_rms_s = n ? sqrt(ss / n) : 0;
	return 0;
}

static double prefill_of(const double *beta, const double *x)
{
	return beta[0] + beta[1] * x[1] + beta[2] * x[2];
}

static int fit_prefill(const struct fg_calib *c, const double *step, const double *prior,
		       const double *floor_sq, double *beta, struct fg_calib_fit *f)
{
	struct lsq q;
	double x[3], cut = INFINITY;

	for (int pass = 0; pass < 2; pass++) {
		memset(&q, 0, sizeof(q));
		q.d = 3;
		for (uint32_t i = 0; i < c->pre_len; i++) {
			const struct fg_calib_prefill_obs *o = &c->pre[(c->pre_head + i) % FG_CALIB_WINDOW];
			prefill_row(o, step, x);
			if (pass && fabs(o->ttft_s - prefill_of(beta, x)) > cut)
				continue;
			lsq_add(&q, x, o->ttft_s);
		}
		if (lsq_solve(&q, prior, floor_sq, beta))
			return -1;
		if (pass)
			break;
		for (uint32_t i = 0; i < c->pre_len; i++) {
			const struct fg_calib_prefill_obs *o = &c->pre[(c->pre_head + i) % FG_CALIB_WINDOW];
			prefill_row(o, step, x);
			resid[i] = o->ttft_s - prefill_of(beta, x);
		}
		cut = TRIM_MADS * median_abs(resid, c->pre_len);
	}
	double ss = 0;
	uint32_t n = 0;
	for (uint32_t i = 0; i < c->pre_len; i++) {
		const struct fg_calib_prefill_obs *o = &c->pre[(c->pre_head + i) % FG_CALIB_WINDOW];
		prefill_row(o, step, x);
		double r = o->ttft_s - prefill_of(beta, x);
		if (fabs(r) > cut)
			continue;
		ss += r * r;
		n++;
	}
	f->n_prefill = n;
	f->trimmed += c->pre_len - n;
	f->prefill_rms_s = n ? sqrt(ss / n) : 0;
	return 0;
}

const struct fg_calib_fit *fg_calib_refit(struct fg_calib *c, uint64_t now_ns)
{
	const struct fg_cost_model *a = &c->assumed;
	struct fg_calib_fit f = { 0 };
	double gpus = a->gpus ? a->gpus : 1;
	double batch = a->ref_batch ? a->ref_batch : 1;
	double ctx = batch * (a->ref_context ? a->ref_context : 1);
	/* the assumption: no overheads, the weights and KV read at the policy's MBU */
	double fixed0 = fg_decode_step_batch_s(a, 0, 0);
	double per_ctx0 = a->kv_bytes_per_token / gpus / a->hbm_effective_per_gpu;
	double dprior[3] = { fixed0, 0, per_ctx0 };
	double dfloor[3] = { 1e-6, 1e-6 * batch * batch, 1e-6 * ctx * ctx };
	double dbeta[3] = { fixed0, 0, per_ctx0 };
	double pbeta[3], pprior[3] = { 0, a->prompt_token_s, MIX_PRIOR };
	double pfloor[3] = { 1e-6, 1e-6 * (double)a->ref_context * a->ref_context, 1e-6 * fixed0 * fixed0 };

	drop_old(c, now_ns);
	f.cm = *a;
	if (c->dec_len < FG_CALIB_MIN_DECODE || c->pre_len < FG_CALIB_MIN_PREFILL ||
	    fit_decode(c, dprior, dfloor, dbeta, &f) ||
	    fit_prefill(c, dbeta, pprior, pfloor, pbeta, &f)) {
		f.n_decode = c->dec_len;
		f.n_prefill = c->pre_len;
		c->fit = f;
		return &c->fit;
	}
	/* the box: each term within 1/BOX .. BOX of the assumption's scale
	 * (the fixed part and the per-sequence part share the step's) */
	bool hit = false;
	f.prompt_token_s = clampd(pbeta[1], a->prompt_token_s / FG_CALIB_BOX,
				  a->prompt_token_s * FG_CALIB_BOX, &hit);
	f.prefill_lag_s = pbeta[0];
	f.step_fixed_s = clampd(dbeta[0], fixed0 / FG_CALIB_BOX, fixed0 * FG_CALIB_BOX, &hit);
	f.step_per_seq_s = clampd(dbeta[1], -fixed0 / batch, fixed0 * FG_CALIB_BOX / batch, &hit);
	f.step_per_context_s = clampd(dbeta[2], per_ctx0 / FG_CALIB_BOX, per_ctx0 * FG_CALIB_BOX,
				      &hit);
	/* a step of the reference batch must still take time */
	if (f.step_fixed_s + f.step_per_seq_s * batch < fixed0 / FG_CALIB_BOX) {
		f.step_per_seq_s = (fixed0 / FG_CALIB_BOX - f.step_fixed_s) / batch;
		hit = true;
	}
	f.bounded = hit;
	f.valid = true;
	fg_cost_model_calibrated(&f.cm, a, f.prompt_token_s, f.step_fixed_s, f.step_per_seq_s,
				 f.step_per_context_s);
	c->fit = f;
	return &c->fit;
}
