/* policy_defaults.c — the values a policy starts from before its file is read:
 * the seed's replica (Llama 3.3 70B, FP8, TP=4 H100, batch 128 at 1,700
 * tokens of context, 646,503-token pool, 65% ceiling) and the agent's
 * defaults (docs/design.md, "Policy defaults", gives each one's reason).
 * Tiers and tenants start empty. */
#include <string.h>
#include "policy.h"

void fg_policy_defaults(struct fg_policy *p)
{
	memset(p, 0, sizeof(*p));
	struct fg_replica *r = &p->replica;
	strcpy(r->model.name, "llama-3.3-70b");
	r->model.params = 70.55e9;
	r->model.layers = 80;
	r->model.kv_heads = 8;
	r->model.head_dim = 128;
	r->model.weight_bytes = 1;
	r->model.kv_bytes = 2;
	/* Llama 3's tokenizer on English (~4 bytes a token) and chat template:
	 * <|start_header_id|> role <|end_header_id|> \n\n ... <|eot_id|> per
	 * message; <|begin_of_text|> and the assistant header per request */
	r->model.chars_per_token = 4;
	r->model.message_tokens = 5;
	r->model.reply_tokens = 5;
	r->gpus = 4;
	r->peak_flops = 1979e12;
	r->hbm_bytes_per_s = 3.35e12;
	r->usd_per_hour = 2.50;
	r->prefill_mfu = 0.50;
	r->decode_mbu = 0.75;
	r->decode_batch = 128;
	r->decode_context = 1700;
	r->kv_pool_tokens = 646503;
	r->ceiling = 0.65;
	r->cached_prompt_weight = 0.1;

	struct fg_agent *a = &p->agent;
	a->mode = FG_MODE_FRONT;
	strcpy(a->listen.host, "0.0.0.0");
	a->listen.port = 8000;
	strcpy(a->engine.host, "127.0.0.1");
	a->engine.port = 8001;
	a->n_protected_ports = 1;
	a->protected_ports[0] = 8000;
	a->xdp_mode = FG_XDP_NATIVE;
	a->deny_allowance_per_s = 2;
	a->shed_rst_per_s = 200;
	strcpy(a->metrics_listen.host, "127.0.0.1");
	a->metrics_listen.port = 9464;
	a->engine_queue_steps = 2;
	a->metering = FG_METER_REPLICA_TIME;
	a->output_pricing = FG_OUTPUT_CONTEXT;
	a->calibration = FG_CALIB_ADVISE;
	a->engine_scheduling = FG_ENGINE_FCFS;
	a->max_body_bytes = 8u << 20;
	a->kv_headroom = 0.95;
	a->peak_window_s = 60;
	a->header_timeout_s = 10;
	a->body_timeout_s = 30;
	a->idle_timeout_s = 60;
	a->upstream_timeout_s = 600;
	a->tokenize_timeout_s = 2;
	/* a long stream's whole life: 32K output tokens at 10 tokens/s is
	 * ~55 min; a request past it holds a slot nobody is served by */
	a->request_timeout_s = 3600;
	a->steer_fail_open = 1;
	a->fleet.period_s = 2;
	a->fleet.buffer_s = 1;
	a->fleet.node_timeout_s = 300;
	a->fleet.call_timeout_s = 0.5;
	/* max_connections, max_connections_per_source and max_buffered_bytes
	 * stay 0: the agent derives them at start from its fd limit (half of it,
	 * and half of that per source) and its memory limit */
	/* twice the seed replica's decode batch: a tenant can fill the engine
	 * and have as many again waiting its turn */
	a->limits.max_inflight_per_tenant = 256;
	/* one proxy thread until N threads share the gateway with finer locks
	 * than one (docs/design.md, "Workers") */
	a->workers = 1;
}
