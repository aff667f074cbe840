/* pricing.c — prompt estimate, calibration, reservation and settlement
 * prices; see pricing.h. */
#include <math.h>
#include <string.h>
#include "pricing.h"

void fg_calibration_init(struct fg_calibration *c)
{
	memset(c, 0, sizeof(*c));
	c->n = 1;
	c->e[0].chars_per_token = FG_CPT_INITIAL;
}

static int find_model(const struct fg_calibration *c, const char *model)
{
	if (!model || !*model)
		return 0;
	if (strlen(model) >= FG_CAL_MODEL_MAX)
		return -1;
	for (uint32_t i = 1; i < c->n; i++)
		if (!strcmp(c->e[i].model, model))
			return (int)i;
	return -1;
}

double fg_chars_per_token(const struct fg_calibration *c, const char *model)
{
	int i = find_model(c, model);

	return c->e[i < 0 ? 0 : i].chars_per_token;
}

static double clamp_cpt(double v)
{
	if (!isfinite(v))
		return FG_CPT_INITIAL;
	return v < FG_CPT_MIN ? FG_CPT_MIN : v > FG_CPT_MAX ? FG_CPT_MAX : v;
}

static void learn_into(struct fg_cal_entry *e, double observed)
{
	e->chars_per_token = clamp_cpt(e->chars_per_token +
				       FG_CPT_ALPHA * (observed - e->chars_per_token));
	e->samples++;
}

void fg_calibration_learn(struct fg_calibration *c, const char *model, uint64_t chars,
			  uint64_t prompt_tokens)
{
	if (!chars || !prompt_tokens)
		return;
	double observed = clamp_cpt((double)chars / (double)prompt_tokens);
	int i = find_model(c, model);

	if (i < 0 && c->n < FG_CAL_MODELS && strlen(model) < FG_CAL_MODEL_MAX) {
		i = (int)c->n++;
		strcpy(c->e[i].model, model);
		/* a new model starts from what the node has learned so far */
		c->e[i].chars_per_token = c->e[0].chars_per_token;
	}
	if (i > 0)
		learn_into(&c->e[i], observed);
	learn_into(&c->e[0], observed);
}

struct fg_price fg_price_request(const struct fg_cost_model *cm, enum fg_metering mode,
				 const struct fg_calibration *cal, const char *model,
				 const struct fg_request_shape *shape,
				 uint32_t tier_default_max_tokens)
{
	struct fg_price p;
	double cpt = fg_chars_per_token(cal, model);
	uint64_t per_choice = shape->max_tokens ? shape->max_tokens
			      : tier_default_max_tokens ? tier_default_max_tokens
							: FG_FALLBACK_MAX_TOKENS;
	uint32_t n = shape->n ? shape->n : 1;

	p.prompt_tokens = ceil((double)shape->prompt_chars / cpt) + (double)shape->prompt_token_ids;
	p.output_tokens = shape->prompt_only ? 0 : (double)n * (double)per_choice;
	p.choices = n;
	/* worst case: every choice decodes its full max from this prompt */
	p.units = fg_metered_units_n(cm, mode, p.prompt_tokens, 0, p.output_tokens, p.choices);
	return p;
}

double fg_settle_units(const struct fg_cost_model *cm, enum fg_metering mode,
		       const struct fg_price *reserved, const struct fg_usage *u)
{
	double prompt = u->prompt_tokens > 0 ? u->prompt_tokens : 0;
	double cached = u->cached_tokens > 0 ? u->cached_tokens : 0;
	double completion = u->completion_tokens > 0 ? u->completion_tokens : 0;

	if (cached > prompt)
		cached = prompt;
	if (completion > reserved->output_tokens)
		completion = reserved->output_tokens;
	return fg_metered_units_n(cm, mode, prompt, cached, completion, reserved->choices);
}
