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
	cm->step_overhead_s = 0;
	cm->seq_overhead_s = 0;
	cm->ceiling = r->ceiling;
	cm->output_pricing = FG_OUTPUT_CONTEXT;
	cm->kv_pool_tokens = (double)r->kv_pool_tokens;
	cm->cached_prompt_weight = r->cached_prompt_weight;
	cm->dedicated_usd_per_month = gpus * r->usd_per_hour * FG_HOURS_PER_MONTH;
	fg_cost_model_derive(cm);
}

void fg_cost_model_derive(struct fg_cost_model *cm)
{
	double gpus = cm->gpus ? cm->gpus : 1;
	double batch = cm->ref_batch;

	cm->decode_step_s = fg_decode_step_batch_s(cm, batch, batch * cm->ref_context);
	cm->output_token_s = batch ? cm->decode_step_s / batch : 0;
	cm->output_weight = cm->output_token_s / cm->prompt_token_s;
	/* The batch shares one read of the weights (and the step's overhead)
	 * per step; each sequence reads its own KV and pays its own overhead.
	 * t(decode_context) is output_token_s exactly. */
	cm->output_weights_share_s = batch ? fg_decode_step_batch_s(cm, batch, 0) / batch : 0;
	cm->output_s_per_context = cm->kv_bytes_per_token / gpus / cm->hbm_effective_per_gpu;
	cm->replica_units_per_s = cm->ceiling / cm->prompt_token_s;
}

void fg_cost_model_calibrated(struct fg_cost_model *out, const struct fg_cost_model *assumed,
			      double prompt_token_s, double step_fixed_s, double step_per_seq_s,
			      double step_per_context_s)
{
	double gpus = assumed->gpus ? assumed->gpus : 1;

	*out = *assumed;
	out->prompt_token_s = prompt_token_s;
	out->hbm_effective_per_gpu = assumed->kv_bytes_per_token / gpus / step_per_context_s;
	out->step_overhead_s = step_fixed_s - out->weights_bytes_per_gpu / out->hbm_effective_per_gpu;
	out->seq_overhead_s = step_per_seq_s;
	fg_cost_model_derive(out);
}

void fg_cost_model_priced(struct fg_cost_model *out, const struct fg_cost_model *assumed,
			  double prompt_token_s, double output_weights_share_s,
			  double output_s_per_context, double seq_overhead_s)
{
	double gpus = assumed->gpus ? assumed->gpus : 1;
	double batch = assumed->ref_batch ? assumed->ref_batch : 1;

	*out = *assumed;
	out->prompt_token_s = prompt_token_s;
	out->hbm_effective_per_gpu = assumed->kv_bytes_per_token / gpus / output_s_per_context;
	out->seq_overhead_s = seq_overhead_s;
	/* t(0) * batch = step_overhead + seq_overhead * batch + weights read */
	out->step_overhead_s = batch * (output_weights_share_s - seq_overhead_s) -
			       out->weights_bytes_per_gpu / out->hbm_effective_per_gpu;
	fg_cost_model_derive(out);
}

double fg_cost_model_prefill_mfu_ratio(const struct fg_cost_model *cm,
				       const struct fg_cost_model *assumed)
{
	return cm->prompt_token_s > 0 ? assumed->prompt_token_s / cm->prompt_token_s : 0;
}

double fg_cost_model_decode_mbu_ratio(const struct fg_cost_model *cm,
				      const struct fg_cost_model *assumed)
{
	return assumed->hbm_effective_per_gpu > 0
		? cm->hbm_effective_per_gpu / assumed->hbm_effective_per_gpu : 0;
}

void fg_cost_model_init_policy(struct fg_cost_model *cm, const struct fg_policy *p)
{
	fg_cost_model_init(cm, &p->replica);
	cm->output_pricing = p->agent.output_pricing;
}

double fg_decode_step_batch_s(const struct fg_cost_model *cm, double batch,
			      double total_context_tokens)
{
	double gpus = cm->gpus ? cm->gpus : 1;
	double kv_per_gpu = total_context_tokens * cm->kv_bytes_per_token / gpus;

	return cm->step_overhead_s + cm->seq_overhead_s * batch +
	       (cm->weights_bytes_per_gpu + kv_per_gpu) / cm->hbm_effective_per_gpu;
}

double fg_decode_step_s(const struct fg_cost_model *cm, double total_context_tokens)
{
	double batch = cm->ref_context ? total_context_tokens / cm->ref_context : 0;

	return fg_decode_step_batch_s(cm, batch, total_context_tokens);
}

double fg_batch_step_s(const struct fg_cost_model *cm, double sequences, double total_context,
		       double prefill_tokens)
{
	/* no decoding sequence, no read of the weights for decode */
	double decode = sequences > 0 ? fg_decode_step_batch_s(cm, sequences, total_context) : 0;

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
