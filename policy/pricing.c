/* pricing.c — prompt estimate, per-tenant calibration, reservation and
 * settlement prices; see pricing.h. */
#include <math.h>
#include <string.h>
#include "pricing.h"

int fg_cal_model_find(const struct fg_cal_models *m, const char *model)
{
	if (!model)
		model = "";
	for (uint32_t i = 0; i < m->n; i++)
		if (!strcmp(m->name[i], model))
			return (int)i + 1;
	return 0;
}

int fg_cal_model_add(struct fg_cal_models *m, const char *model)
{
	int i = fg_cal_model_find(m, model);

	if (i)
		return i;
	if (!model)
		model = "";
	if (m->n >= FG_CAL_MODELS || strlen(model) >= FG_CAL_MODEL_MAX)
		return 0;
	strcpy(m->name[m->n], model);
	return (int)++m->n;
}

void fg_calibration_init(struct fg_calibration *c)
{
	memset(c, 0, sizeof(*c));
}

static const struct fg_cal_slot *slot_of(const struct fg_calibration *c, int model)
{
	if (model <= 0)
		return NULL;
	for (int i = 0; i < FG_CAL_SLOTS; i++)
		if (c->s[i].model == model)
			return &c->s[i];
	return NULL;
}

static double bounded(double v, double prior)
{
	double hi = fmin(FG_CPT_MAX, prior * FG_CPT_OVER_PRIOR);

	if (!isfinite(v))
		return prior;
	return v < FG_CPT_MIN ? FG_CPT_MIN : v > hi ? hi : v;
}

static double prior_of(double prior)
{
	return isfinite(prior) && prior >= FG_CPT_MIN && prior <= FG_CPT_MAX ? prior : 4.0;
}

double fg_chars_per_token(const struct fg_calibration *c, int model, double prior)
{
	const struct fg_cal_slot *s = slot_of(c, model);

	prior = prior_of(prior);
	return s && s->samples ? bounded(s->chars_per_token, prior) : prior;
}

void fg_calibration_learn(struct fg_calibration *c, int model, double prior, uint64_t chars,
			  double text_tokens)
{
	if (model <= 0 || model > 255 || !chars || !(text_tokens >= 1))
		return;
	prior = prior_of(prior);
	struct fg_cal_slot *s = (struct fg_cal_slot *)slot_of(c, model);
	if (!s) {
		/* a free slot, else the model this tenant has taught least */
		s = &c->s[0];
		for (int i = 0; i < FG_CAL_SLOTS; i++) {
			if (!c->s[i].model) {
				s = &c->s[i];
				break;
			}
			if (c->s[i].samples < s->samples)
				s = &c->s[i];
		}
		*s = (struct fg_cal_slot){ .chars_per_token = (float)prior, .model = (uint8_t)model };
	}
	double cur = s->chars_per_token, seen = bounded((double)chars / text_tokens, prior);
	double step = seen < cur ? FG_CPT_STEP_DOWN : FG_CPT_STEP_UP;
	s->chars_per_token = (float)bounded(cur + step * (seen - cur), prior);
	if (s->samples < UINT16_MAX)
		s->samples++;
}

static double framing_of(const struct fg_model *rule, const struct fg_request_shape *s)
{
	return s->chat ? (double)s->messages * rule->message_tokens + rule->reply_tokens : 0;
}

static double media_of(const struct fg_model *rule, const struct fg_request_shape *s)
{
	return (double)s->images * rule->image_tokens + (double)s->audios * rule->audio_tokens;
}

double fg_prompt_bound(const struct fg_model *rule, const struct fg_request_shape *s)
{
	uint32_t seqs = s->prompts > 1 ? s->prompts : 1;
	double bound = (double)s->prompt_chars + (double)s->prompt_token_ids + media_of(rule, s) +
		       2 * framing_of(rule, s) +
		       (s->chat ? (double)s->messages * FG_MESSAGE_SLACK : 0) +
		       (double)seqs * FG_PROMPT_SLACK;

	/* the template may add more than the policy says: twice its framing
	 * and some slack a message still bound what an honest engine counts */
	if (s->exact_prompt_tokens && seqs == 1 && bound < (double)s->exact_prompt_tokens)
		bound = (double)s->exact_prompt_tokens;
	return bound;
}

struct fg_prompt_est fg_estimate_prompt(const struct fg_model *rule, double cpt,
					const struct fg_request_shape *s)
{
	struct fg_prompt_est e = { 0 };
	double prior = prior_of(rule->chars_per_token);
	double safe = fmin(prior_of(cpt), prior);
	uint32_t seqs = s->prompts > 1 ? s->prompts : 1;

	cpt = prior_of(cpt);
	e.fixed = framing_of(rule, s) + media_of(rule, s) + (double)s->prompt_token_ids;
	double chars = (double)s->prompt_chars;
	e.tokens = ceil(chars / cpt) + e.fixed;
	e.tokens_safe = ceil(chars / safe) + e.fixed;
	e.tokens_max = fg_prompt_bound(rule, s);
	if (seqs > 1) {
		double lc = (double)s->longest_chars, li = (double)s->longest_token_ids;
		e.longest = ceil(lc / cpt) + li;
		e.longest_safe = ceil(lc / safe) + li;
		e.longest_max = lc + li + FG_PROMPT_SLACK;
	} else {
		e.longest = e.tokens;
		e.longest_safe = e.tokens_safe;
		e.longest_max = e.tokens_max;
	}
	if (s->exact_prompt_tokens && seqs == 1) {
		e.tokens = e.longest = e.tokens_safe = e.longest_safe = (double)s->exact_prompt_tokens;
		e.exact = true;
	}
	return e;
}

double fg_price_tokenizer(const struct fg_cost_model *cm, enum fg_metering mode, double tokens)
{
	return tokens > 0 ? fg_metered_units(cm, mode, tokens, tokens, 0) : 0;
}

struct fg_price fg_price_request(const struct fg_cost_model *cm, enum fg_metering mode,
				 const struct fg_prompt_est *prompt,
				 const struct fg_request_shape *shape,
				 uint32_t tier_default_max_tokens, uint64_t room)
{
	struct fg_price p = { 0 };
	uint32_t n = shape->n ? shape->n : 1;
	uint32_t prompts = shape->prompts > 1 ? shape->prompts : 1;

	p.sequences = prompts * n;
	p.prompts = prompts;
	if (shape->fixed_units > 0) {
		p.units = shape->fixed_units;
		p.flat = true;
		return p;
	}
	p.prompt_tokens = prompt->tokens;
	p.prompt_ceiling = prompt->tokens_max;
	if (shape->no_gpu) {
		p.units = fg_price_tokenizer(cm, mode, p.prompt_tokens);
		p.flat = true;
		return p;
	}
	if (!shape->prompt_only) {
		uint64_t dflt = tier_default_max_tokens ? tier_default_max_tokens : FG_FALLBACK_MAX_TOKENS;
		/* as the engine does without max_tokens: what the context leaves */
		if (room < dflt)
			dflt = room ? room : 1;
		p.per_choice = shape->max_tokens ? shape->max_tokens : dflt;
		p.output_tokens = (double)p.sequences * (double)p.per_choice;
	}
	/* worst case: every sequence decodes its full cap */
	p.units = fg_metered_units_batch(cm, mode, p.prompt_tokens, 0, p.output_tokens, p.prompts,
					 p.sequences);
	return p;
}

double fg_settle_units(const struct fg_cost_model *cm, enum fg_metering mode,
		       const struct fg_price *reserved, const struct fg_usage *u)
{
	if (reserved->flat)
		return reserved->units;
	double prompt = u->prompt_tokens > 0 ? u->prompt_tokens : 0;
	double cached = u->cached_tokens > 0 ? u->cached_tokens : 0;
	double completion = u->completion_tokens > 0 ? u->completion_tokens : 0;

	if (reserved->prompt_ceiling > 0 && prompt > reserved->prompt_ceiling)
		prompt = reserved->prompt_ceiling;
	if (cached > prompt)
		cached = prompt;
	if (completion > reserved->output_tokens)
		completion = reserved->output_tokens;
	return fg_metered_units_batch(cm, mode, prompt, cached, completion, reserved->prompts,
				      reserved->sequences);
}
