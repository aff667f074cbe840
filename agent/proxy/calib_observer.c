/* calib_observer.c — see calib_observer.h. */
#include "agent/proxy/calib_observer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fg_pcal *fg_pcal_new(const struct fg_policy *p, const struct fg_cost_model *assumed,
			    uint64_t now_ns)
{
	struct fg_pcal *pc = calloc(1, sizeof(*pc));

	if (!pc)
		return NULL;
	pc->mode = p->agent.calibration;
	pc->prev.broken = true; /* nothing before the first group */
	fg_calib_init(&pc->fit, assumed);
	fg_calib_follow_init(&pc->follow, assumed, now_ns);
	fg_calib_hist_init(&pc->hist);
	return pc;
}

void fg_pcal_free(struct fg_pcal *pc)
{
	free(pc);
}

/* The TPOT cap's step model: under `on` the measured step as soon as the
 * fit is valid, with no follow (a cap on a model faster than the engine
 * breaks the SLO while prices catch up); else the policy's, which
 * fg_gw_reload put in gw->cm. */
static void set_step_model(struct fg_pcal *pc, struct fg_gateway *gw)
{
	bool measured = pc->mode == FG_CALIB_ON && pc->fit.fit.valid;

	if (measured)
		fg_gw_set_step_model(gw, &pc->fit.fit.cm);
	else if (pc->step_measured)
		fg_gw_set_step_model(gw, &pc->fit.assumed);
	pc->step_measured = measured;
}

void fg_pcal_apply_policy(struct fg_pcal *pc, const struct fg_policy *p, struct fg_gateway *gw,
			  bool new_engine, uint64_t now_ns)
{
	pc->mode = p->agent.calibration;
	if (new_engine || pc->mode == FG_CALIB_OFF) {
		fg_calib_init(&pc->fit, &gw->cm);
		fg_calib_follow_init(&pc->follow, &gw->cm, now_ns);
		fg_calib_hist_init(&pc->hist);
		pc->cur.broken = true;
	} else {
		fg_calib_set_assumed(&pc->fit, &gw->cm);
		fg_calib_follow_set_assumed(&pc->follow, &gw->cm);
	}
	if (pc->mode == FG_CALIB_ON) {
		fg_gw_set_cost_model(gw, &pc->follow.applied);
		fg_calib_refit(&pc->fit, now_ns); /* the measured on the new policy's model */
	}
	set_step_model(pc, gw);
}

/* The group `cur` is complete: observe it if nothing made it ambiguous.
 * Every stream that decoded or started in `prev` and did not end there
 * must have decoded in `cur`. */
static void close_group(struct fg_pcal *pc, uint64_t now_ns)
{
	struct fg_pcal_group *c = &pc->cur, *p = &pc->prev;

	pc->steps_seen++;
	if (p->first_ns && c->decoded) {
		pc->gap_token_s += (double)(c->first_ns - p->first_ns) / 1e9 * c->decoded;
		pc->gap_tokens += c->decoded;
	}
	bool whole = !c->broken && !p->broken && c->decoded >= 1 &&
		     c->decoded == p->decoded + p->started - p->ended;
	if (whole && fg_calib_add_step(&pc->fit, now_ns, c->decoded, c->context, c->prefill,
				       (double)(c->first_ns - p->first_ns) / 1e9) == FG_CALIB_TAKEN)
		pc->steps_observed++;
	*p = *c;
	memset(c, 0, sizeof(*c));
	pc->step++;
}

/* A token arrives: into the current group, or the first of the next. */
static struct fg_pcal_group *group_at(struct fg_pcal *pc, uint64_t now_ns)
{
	struct fg_pcal_group *c = &pc->cur;

	if (c->first_ns && now_ns - c->last_ns > FG_PCAL_CLUSTER_NS)
		close_group(pc, now_ns);
	if (!c->first_ns) {
		c->first_ns = now_ns;
		c->broken = c->broken || pc->n_opaque > 0;
	}
	c->last_ns = now_ns;
	return c;
}

void fg_pcal_sent(struct fg_pcal *pc, struct fg_pcal_req *q, const struct fg_gw_request *r,
		  bool followable)
{
	if (pc->mode == FG_CALIB_OFF || q->state != FG_PCAL_NONE)
		return;
	*q = (struct fg_pcal_req){ 0 };
	if (!followable || r->price.sequences > 1 || r->price.prompts > 1) {
		q->state = FG_PCAL_OPAQUE;
		pc->n_opaque++;
		pc->cur.broken = true; /* it may already run in this step */
		return;
	}
	q->state = FG_PCAL_PREFILL;
	q->prompt = r->price.prompt_tokens;
	pc->n_prefill++;
}

void fg_pcal_output(struct fg_pcal *pc, struct fg_pcal_req *q, double completion_tokens,
		    double uncached_prompt, uint64_t now_ns)
{
	if (q->state == FG_PCAL_PREFILL && completion_tokens > 0) {
		struct fg_pcal_group *g = group_at(pc, now_ns);
		pc->n_prefill--;
		pc->n_decode++;
		g->started++;
		g->prefill += uncached_prompt > 0 ? uncached_prompt : q->prompt;
		g->broken = g->broken || completion_tokens != 1;
		q->state = FG_PCAL_DECODE;
		q->out = completion_tokens;
		q->last_step = pc->step;
		return;
	}
	if (q->state != FG_PCAL_DECODE || !(completion_tokens > q->out))
		return;
	struct fg_pcal_group *g = group_at(pc, now_ns);
	/* its KV as the step began: the prompt and what it had output */
	g->context += q->prompt + q->out;
	g->decoded++;
	g->broken = g->broken || completion_tokens - q->out != 1 || q->last_step + 1 != pc->step;
	q->out = completion_tokens;
	q->last_step = pc->step;
}

void fg_pcal_end(struct fg_pcal *pc, struct fg_pcal_req *q)
{
	switch (q->state) {
	case FG_PCAL_NONE:
		return;
	case FG_PCAL_PREFILL:
		pc->n_prefill--;
		break;
	case FG_PCAL_OPAQUE:
		pc->n_opaque--;
		break;
	case FG_PCAL_DECODE:
		pc->n_decode--;
		/* it will not decode in the next step: the group of its last
		 * token expects one fewer */
		if (q->last_step == pc->step)
			pc->cur.ended++;
		else if (q->last_step + 1 == pc->step)
			pc->prev.broken = pc->cur.broken = true; /* ended a step late: unknown */
		break;
	}
	q->state = FG_PCAL_NONE;
}

void fg_pcal_engine_itl(struct fg_pcal *pc, double sum, double count)
{
	if (pc->have_scrape && count > pc->engine_at_scrape[1] && sum >= pc->engine_at_scrape[0]) {
		pc->engine_itl_s = (sum - pc->engine_at_scrape[0]) / (count - pc->engine_at_scrape[1]);
		double n = pc->gap_tokens - pc->seen_at_scrape[1];
		pc->proxy_itl_s = n > 0 ? (pc->gap_token_s - pc->seen_at_scrape[0]) / n : 0;
		/* the verdict stands until the streams give another one */
		if (pc->proxy_itl_s > 0 && pc->engine_itl_s > 0)
			pc->engine_apart =
				fabs(pc->proxy_itl_s / pc->engine_itl_s - 1) > FG_PCAL_CLOCK_APART;
	} else if (!(count >= pc->engine_at_scrape[1])) {
		pc->engine_itl_s = pc->proxy_itl_s = 0; /* the engine restarted */
	}
	/* nothing new: the means stay those of the last interval with tokens */
	if (!pc->have_scrape || count != pc->engine_at_scrape[1]) {
		pc->engine_at_scrape[0] = sum;
		pc->engine_at_scrape[1] = count;
		pc->seen_at_scrape[0] = pc->gap_token_s;
		pc->seen_at_scrape[1] = pc->gap_tokens;
	}
	pc->have_scrape = true;
}

void fg_pcal_finished(struct fg_pcal *pc, double prompt_tokens, double completion_tokens)
{
	if (!(prompt_tokens >= 0) || !(completion_tokens > 0) || !isfinite(prompt_tokens) ||
	    !isfinite(completion_tokens))
		return;
	pc->ended_output_tokens += completion_tokens;
	pc->ended_context_tokens += completion_tokens * (prompt_tokens + completion_tokens / 2);
}

void fg_pcal_engine_totals(struct fg_pcal *pc, const struct fg_engine_totals *t, double running,
			   uint64_t asked_ns)
{
	if (pc->mode == FG_CALIB_OFF)
		return;
	struct fg_engine_totals with = *t;
	with.gw_output_tokens = pc->ended_output_tokens;
	with.gw_context_tokens = pc->ended_context_tokens;
	with.gw_streamed_tokens = pc->gap_tokens;
	with.have |= FG_ET_GW_CONTEXT;
	/* off the gateway's clock: what the histograms gave is dropped too */
	if (pc->engine_apart && !pc->hist.paused)
		fg_calib_drop_intervals(&pc->fit);
	pc->hist.paused = pc->engine_apart;
	fg_calib_hist_scrape(&pc->hist, &pc->fit, asked_ns, &with, running);
}

static void log_sharp(const struct fg_pcal *pc, const struct fg_calib_fit *f)
{
	const struct fg_cost_model *a = &pc->fit.assumed;

	fprintf(stderr,
		"fairgated: calibration: the engine measures an output weight of %.2f (policy %.2f), "
		"prompt token %.2f us (policy %.2f), decode step %.2f ms at batch %u (policy %.2f), "
		"from %u steps (%u prefilling) and %u decode and %u prefill intervals of the "
		"engine's histograms; agent.calibration: %s\n",
		f->cm.output_weight, a->output_weight, f->cm.prompt_token_s * 1e6,
		a->prompt_token_s * 1e6, f->cm.decode_step_s * 1e3, a->ref_batch,
		a->decode_step_s * 1e3, f->n_steps, f->n_prefill_steps,
		f->used[FG_CALIB_SRC_ENGINE_DECODE], f->used[FG_CALIB_SRC_ENGINE_PREFILL],
		pc->mode == FG_CALIB_ON ? "on, prices follow (at most 1.25x a minute, within "
					  "0.5x-2x of the policy's)"
					: "advise, prices unchanged");
}

void fg_pcal_tick(struct fg_pcal *pc, struct fg_gateway *gw, uint64_t now_ns)
{
	if (pc->mode == FG_CALIB_OFF)
		return;
	const struct fg_calib_fit *f = fg_calib_refit(&pc->fit, now_ns);
	if (fg_calib_follow_step(&pc->follow, f, now_ns)) {
		pc->sharp_changes++;
		log_sharp(pc, f);
	}
	if (pc->mode == FG_CALIB_ON)
		fg_gw_set_cost_model(gw, &pc->follow.applied);
	else
		fg_calib_follow_hold(&pc->follow, now_ns); /* advise charges the policy's */
	set_step_model(pc, gw);
}
