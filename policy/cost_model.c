/* cost_model.c — replica-time prices from the policy's `replica` block.
 * See cost_model.h; the derivations follow the seed's worked example. */
#include "cost_model.h"

void fg_cost_model_init(struct fg_cost_model *cm, const struct fg_replica *r)
{
	const struct fg_model *m = &r->model;
	double gpus = r->gpus ? r->gpus : 1;

	cm->gpus = r->gpus;
	cm->ref_batch = r->decode_batch;
	cm->ref_context = r->decode_context;
	cm->prompt_token_s = 2.0 * m->params / (gpus * r->peak_flops * r->prefill_mfu);
	cm->weights_bytes_per_gpu = m->params * m->weight_bytes / gpus;
	cm->kv_bytes_per_token = 2.0 * m->layers * m->kv_heads * m->head_dim * m->kv_bytes;
	cm->hbm_effective_per_gpu = r->hbm_bytes_per_s * r->decode_mbu;
	cm->decode_step_s = fg_decode_step_s(cm, (double)r->decode_batch * r->decode_context);
	cm->output_token_s = r->decode_batch ? cm->decode_step_s / r->decode_batch : 0;
	cm->output_weight = cm->output_token_s / cm->prompt_token_s;
	/* The batch shares one read of the weights per step; each sequence
	 * reads its own KV. t(decode_context) is output_token_s exactly. */
	cm->output_weights_share_s = r->decode_batch
		? fg_decode_step_s(cm, 0) / r->decode_batch : 0;
	cm->output_s_per_context = cm->kv_bytes_per_token / gpus / cm->hbm_effective_per_gpu;
	cm->output_pricing = FG_OUTPUT_CONTEXT;
	cm->replica_units_per_s = r->ceiling / cm->prompt_token_s;
	cm->kv_pool_tokens = (double)r->kv_pool_tokens;
	cm->cached_prompt_weight = r->cached_prompt_weight;
	cm->dedicated_usd_per_month = gpus * r->usd_per_hour * FG_HOURS_PER_MONTH;
}

void fg_cost_model_init_policy(struct fg_cost_model *cm, const struct fg_policy *p)
{
	fg_cost_model_init(cm, &p->replica);
	cm->output_pricing = p->agent.output_pricing;
}

double fg_decode_step_s(const struct fg_cost_model *cm, double total_context_tokens)
{
	double gpus = cm->gpus ? cm->gpus : 1;
	double kv_per_gpu = total_context_tokens * cm->kv_bytes_per_token / gpus;

	return (cm->weights_bytes_per_gpu + kv_per_gpu) / cm->hbm_effective_per_gpu;
}

double fg_batch_step_s(const struct fg_cost_model *cm, double sequences, double total_context,
		       double prefill_tokens)
{
	/* no decoding sequence, no read of the weights for decode */
	double decode = sequences > 0 ? fg_decode_step_s(cm, total_context) : 0;

	return decode + fg_prefill_s(cm, prefill_tokens > 0 ? prefill_tokens : 0);
}

double fg_prefill_s(const struct fg_cost_model *cm, double tokens)
{
	return tokens * cm->prompt_token_s;
}

double fg_output_token_s(const struct fg_cost_model *cm, double context)
{
	return cm->output_weights_share_s + context * cm->output_s_per_context;
}

double fg_decode_units(const struct fg_cost_model *cm, double context, double steps)
{
	if (!(steps > 0) || !(cm->prompt_token_s > 0))
		return 0;
	/* sum over i in [0, steps) of t(context + i): an arithmetic series */
	double s = steps * fg_output_token_s(cm, context) +
		   cm->output_s_per_context * steps * (steps - 1) / 2;
	return s / cm->prompt_token_s;
}

double fg_output_units(const struct fg_cost_model *cm, double prompt, double output, double n)
{
	if (!(output > 0))
		return 0;
	if (cm->output_pricing == FG_OUTPUT_FLAT)
		return output * cm->output_weight;
	if (!(n >= 1))
		n = 1;
	if (!(prompt > 0))
		prompt = 0;
	/* Each choice's first token comes with the prefill; the rest decode
	 * from prompt + 1 on, one more token of KV per step. */
	double per_choice = output / n;
	return per_choice > 1 ? n * fg_decode_units(cm, prompt + 1, per_choice - 1) : 0;
}

double fg_request_units_batch(const struct fg_cost_model *cm, double prompt, double cached,
			      double output, double prompts, double sequences)
{
	if (cached > prompt)
		cached = prompt;
	if (!(prompts >= 1))
		prompts = 1;
	/* the output term is affine in the prompt a sequence decodes from, so
	 * the batch's mean prompt prices its sequences exactly when their
	 * outputs are equal (and the split errs low as in fg_output_units) */
	return (prompt - cached) + cached * cm->cached_prompt_weight +
	       fg_output_units(cm, prompt / prompts, output, sequences);
}

double fg_request_units_n(const struct fg_cost_model *cm, double prompt, double cached,
			  double output, double n)
{
	return fg_request_units_batch(cm, prompt, cached, output, 1, n);
}

double fg_request_units(const struct fg_cost_model *cm, double prompt, double cached,
			double output)
{
	return fg_request_units_n(cm, prompt, cached, output, 1);
}

double fg_metered_units_batch(const struct fg_cost_model *cm, enum fg_metering mode,
			      double prompt, double cached, double output, double prompts,
			      double sequences)
{
	switch (mode) {
	case FG_METER_RAW_TOKENS:
		return prompt + output;
	case FG_METER_REQUESTS:
		return (double)cm->ref_context;
	case FG_METER_REPLICA_TIME:
	default:
		return fg_request_units_batch(cm, prompt, cached, output, prompts, sequences);
	}
}

double fg_metered_units_n(const struct fg_cost_model *cm, enum fg_metering mode,
			  double prompt, double cached, double output, double n)
{
	return fg_metered_units_batch(cm, mode, prompt, cached, output, 1, n);
}

double fg_metered_units(const struct fg_cost_model *cm, enum fg_metering mode,
			double prompt, double cached, double output)
{
	return fg_metered_units_n(cm, mode, prompt, cached, output, 1);
}

struct fg_load_cost fg_load_cost(const struct fg_cost_model *cm, double req_per_s,
				 double prompt_tokens, double output_tokens)
{
	struct fg_load_cost c;

	c.units_per_s = req_per_s * fg_request_units(cm, prompt_tokens, 0, output_tokens);
	c.replicas = c.units_per_s / cm->replica_units_per_s;
	return c;
}

struct fg_context_cost fg_context_cost(const struct fg_cost_model *cm, double tokens)
{
	struct fg_context_cost c;
	double gpus = cm->gpus ? cm->gpus : 1;

	c.kv_bytes = tokens * cm->kv_bytes_per_token;
	c.kv_gib = c.kv_bytes / (1024.0 * 1024.0 * 1024.0);
	c.kv_bytes_per_gpu = c.kv_bytes / gpus;
	c.pool_share = cm->kv_pool_tokens > 0 ? tokens / cm->kv_pool_tokens : 0;
	return c;
}
