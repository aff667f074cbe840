/* proxy_settle.c — the end of a request, in one place: every path that
 * ends an exchange (the engine's answer complete, an engine failure, the
 * client gone) calls fg_exchange_settle, which closes the books in order:
 * usage, the gateway, the tenant table, the kernel, the scheduler. */
#include <jansson.h>
#include <stdbool.h>
#include <string.h>

#include "agent/proxy/proxy_internal.h"

/* Usage of a JSON response body. Parsing only the top-level "usage" member
 * (the last unescaped `"usage":` — inside a JSON string a quote is always
 * escaped, and engines put usage last) keeps settlement cheap for large
 * answers, and reading that object with yajl (fg_usage_parse) keeps it cheap
 * for small ones; anything odd falls back to jansson, on the whole body. */
static bool usage_of_body(const char *p, size_t n, struct fg_usage *u)
{
	static const char key[] = "\"usage\":";
	const size_t kl = sizeof(key) - 1;
	const char *hit = NULL;

	/* from the end: the key is near it, and memmem over the whole body cost
	 * more than the parse */
	for (const char *e = p + n, *q; (q = memrchr(p, '"', (size_t)(e - p))); e = q)
		if ((size_t)(p + n - q) >= kl && !memcmp(q, key, kl)) {
			hit = q;
			break;
		}
	if (hit) {
		int r = fg_usage_parse(hit + kl, (size_t)(p + n - hit - kl), u);
		if (r >= 0)
			return r == 1;
		json_t *v = json_loadb(hit + kl, (size_t)(p + n - hit - kl), JSON_DISABLE_EOF_CHECK, NULL);
		if (json_is_object(v)) {
			json_t *wrap = json_pack("{s:O}", "usage", v);
			bool ok = wrap && fg_usage_from_json(wrap, u);
			json_decref(wrap);
			json_decref(v);
			return ok;
		}
		json_decref(v);
	}
	json_t *root = json_loadb(p, n, 0, NULL);
	bool ok = root && fg_usage_from_json(root, u);
	json_decref(root);
	return ok;
}

void fg_exchange_read_usage(struct fg_exchange *x)
{
	if (x->sse || !fg_buf_used(&x->resp_copy) || x->resp_copy_overflow)
		return;
	x->usage = (struct fg_usage){ 0 };
	x->usage_known = usage_of_body(fg_buf_head(&x->resp_copy), fg_buf_used(&x->resp_copy),
				       &x->usage);
	x->usage_read = true;
}

void fg_exchange_settle(struct fg_client *c, enum fg_outcome o)
{
	struct fg_proxy *px = c->px;
	struct fg_gateway *gw = px->gw;
	struct fg_exchange *x = c->x;
	struct fg_gw_request *r = &x->gwr;
	struct fg_usage u = { 0 };
	bool have_usage = false;
	double billed = 0;
	uint64_t now = fg_now_ns();

	if (!x || !x->reserved || !x->tenant)
		return;
	x->reserved = false;

	/* 1. what the engine reports it did: usage from the stream's last
	 * chunk (agent/http/http_sse.c) or the response body */
	if (x->sse && x->sse_state.have_usage) {
		/* before the final usage: the prompt as counted, the output as
		 * delivered (a chunk's usage counts one choice) */
		u = x->sse_state.usage;
		u.completion_tokens = fg_sse_output(&x->sse_state);
		have_usage = true;
	} else if (!x->sse) {
		if (!x->usage_read) /* not read ahead (finish reads it, alone) */
			fg_exchange_read_usage(x);
		u = x->usage; /* zero, and not known, when there is no copy to read */
		have_usage = x->usage_known;
	}
	if (have_usage && u.prompt_tokens > 0)
		fg_gw_learn(gw, r, x->info.model, u.prompt_tokens);
	fg_pcal_end(px->calib, &x->pcal);
	if (have_usage)
		fg_pcal_finished(px->calib, u.prompt_tokens, u.completion_tokens);

	/* 2. the gateway (policy/gateway.c): the bucket charged for what ran,
	 * the reservation, KV and engine-window slot released; a stream ended at its first chunk ran its prefill: billed for it */
	bool ran = o == FG_OUT_OK || o == FG_OUT_CLIENT_GONE || o == FG_OUT_CLIENT_STALLED ||
		   o == FG_OUT_REQUEST_TIMEOUT || (x->cut_off && o == x->cut_outcome);
	bool served = ran && r->state != FG_GW_S_QUEUED;
	if (served) {
		if (!have_usage) {
			/* no usage: what was delivered (streams), else what was reserved */
			u = (struct fg_usage){ .prompt_tokens = r->price.prompt_tokens };
			if (x->sse)
				u.completion_tokens = fg_sse_output(&x->sse_state);
			else if (o == FG_OUT_OK)
				u.completion_tokens = r->price.output_tokens;
		}
		billed = fg_gw_finish(gw, r, &u, now);
	} else {
		/* still queued (the client left), or the engine failed or refused:
		 * the tenant pays nothing, the platform's cost */
		fg_gw_abort(gw, r, now);
	}
	/* 3. the tenant table's books: outcome, billed and refunded units */
	fg_tenants_ended(x->tenant, r->price.units, billed, o);
	/* 4. the kernel: the tenant's bucket, reservations and deny window,
	 * through agent/kernel/kernel.c (what gate and fairgatectl read) */
	fg_tenants_publish(px->st, &px->tenants, x->tenant, now);
	/* 5. the scheduler: KV, the engine window and the fair queue moved */
	fg_sched_kick(px);
}
