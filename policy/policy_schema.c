/* policy_schema.c — every key of the policy file: type, range, default,
 * and the checks that span several keys of one block (a tier's context
 * against its KV cap, a tenant's one-of quota, the agent's addresses). */
#include "policy_schema.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cost_model.h"
#include "pricing.h"
#include "request_path.h"
#include "policy_addr.h"
#include "policy_suggest.h"

#define INF INFINITY
#define MEMBER_SIZE(T, m) sizeof(((T *)0)->m)
#define NUM(k, kd, T, m, lo, hi, fl) \
	{ .key = k, .kind = kd, .off = offsetof(T, m), .size = MEMBER_SIZE(T, m), \
	  .min = lo, .max = hi, .flags = fl }
#define DBL(k, T, m, lo, hi, fl) NUM(k, FG_K_DOUBLE, T, m, lo, hi, fl)
#define UINT(k, T, m, lo, hi, fl) NUM(k, FG_K_UINT, T, m, lo, hi, fl)
#define STR(k, kd, T, m, fl) \
	{ .key = k, .kind = kd, .off = offsetof(T, m), .size = MEMBER_SIZE(T, m), .flags = fl }
#define ENUM(k, T, m, names) \
	{ .key = k, .kind = FG_K_ENUM, .off = offsetof(T, m), .enums = names }
#define SUB(k, off_, schema, fl) \
	{ .key = k, .kind = FG_K_MAP, .off = off_, .sub = &schema, .flags = fl }
#define CUSTOM(k, fn, fl) { .key = k, .kind = FG_K_CUSTOM, .decode = fn, .flags = fl }
#define LIST(k, kd, T, m, count, fl) \
	{ .key = k, .kind = kd, .off = offsetof(T, m), .count_off = offsetof(T, count), \
	  .max_count = sizeof(((T *)0)->m) / sizeof(((T *)0)->m[0]), \
	  .size = sizeof(((T *)0)->m[0]), .flags = fl }
#define SCHEMA(fields) { fields, sizeof(fields) / sizeof(fields[0]) }
#define GT FG_F_GT_MIN
#define REQ FG_F_REQUIRED

/* ---- replica: the cost model's inputs (defaults: the seed's replica) ---- */

static const struct fg_field model_fields[] = {
	STR("name", FG_K_TEXT, struct fg_model, name, REQ),
	DBL("params", struct fg_model, params, 0, 1e15, GT | REQ),
	UINT("layers", struct fg_model, layers, 1, 10000, REQ),
	UINT("kv_heads", struct fg_model, kv_heads, 1, 10000, REQ),
	UINT("head_dim", struct fg_model, head_dim, 1, 100000, REQ),
	DBL("weight_bytes", struct fg_model, weight_bytes, 0, 8, GT),
	DBL("kv_bytes", struct fg_model, kv_bytes, 0, 8, GT),
	DBL("chars_per_token", struct fg_model, chars_per_token, FG_CPT_MIN, FG_CPT_MAX, 0),
	UINT("message_tokens", struct fg_model, message_tokens, 0, 10000, 0),
	UINT("reply_tokens", struct fg_model, reply_tokens, 0, 10000, 0),
	UINT("image_tokens", struct fg_model, image_tokens, 0, 1e6, 0),
	UINT("audio_tokens", struct fg_model, audio_tokens, 0, 1e6, 0),
};
static const struct fg_schema model_schema = SCHEMA(model_fields);

static const struct fg_field gpu_fields[] = {
	DBL("peak_flops", struct fg_replica, peak_flops, 0, 1e21, GT),
	DBL("hbm_bytes_per_s", struct fg_replica, hbm_bytes_per_s, 0, 1e16, GT),
	DBL("usd_per_hour", struct fg_replica, usd_per_hour, 0, 1e6, 0),
};
static const struct fg_schema gpu_schema = SCHEMA(gpu_fields);

static const struct fg_field efficiency_fields[] = {
	DBL("prefill_mfu", struct fg_replica, prefill_mfu, 0, 1, GT),
	DBL("decode_mbu", struct fg_replica, decode_mbu, 0, 1, GT),
};
static const struct fg_schema efficiency_schema = SCHEMA(efficiency_fields);

static const struct fg_field decode_fields[] = {
	UINT("batch", struct fg_replica, decode_batch, 1, 1e6, 0),
	UINT("context", struct fg_replica, decode_context, 1, 1e9, 0),
};
static const struct fg_schema decode_schema = SCHEMA(decode_fields);

static const struct fg_field replica_fields[] = {
	SUB("model", offsetof(struct fg_replica, model), model_schema, 0),
	UINT("gpus", struct fg_replica, gpus, 1, 1024, 0),
	SUB("gpu", 0, gpu_schema, 0),
	SUB("efficiency", 0, efficiency_schema, 0),
	SUB("decode", 0, decode_schema, 0),
	UINT("kv_pool_tokens", struct fg_replica, kv_pool_tokens, 1, 1e12, 0),
	DBL("ceiling", struct fg_replica, ceiling, 0, 1, GT),
	DBL("cached_prompt_weight", struct fg_replica, cached_prompt_weight, 0, 1, 0),
};
static const struct fg_schema replica_schema = SCHEMA(replica_fields);

/* Where to point an error about `key` of map: its value, else the map. */
static const struct fg_ynode *at_key(const struct fg_ynode *map, const char *key)
{
	const struct fg_ynode *v = fg_ymap_get(map, key);
	return v ? v : map;
}

/* The first of two keys present in map (for checks between two keys). */
static const struct fg_ynode *at_either(const struct fg_ynode *map, const char *k1,
					const char *k2)
{
	return fg_ymap_get(map, k1) ? fg_ymap_get(map, k1) : at_key(map, k2);
}

static int decode_replica(struct fg_pctx *c, const struct fg_ynode *v, void *base,
			  const char *path)
{
	struct fg_policy *p = base;
	struct fg_replica *r = &p->replica;

	if (fg_decode_map(c, v, &replica_schema, r, path, NULL))
		return -1;
	/* The pricing reference must be a batch the pool can hold. */
	if ((double)r->decode_batch * r->decode_context > (double)r->kv_pool_tokens) {
		const struct fg_ynode *d = fg_ymap_get(v, "decode");
		return fg_pfail(c, d ? d : at_key(v, "kv_pool_tokens"),
				"replica.decode: batch %u x context %u = %.0f tokens does not fit in kv_pool_tokens %llu",
				r->decode_batch, r->decode_context,
				(double)r->decode_batch * r->decode_context,
				(unsigned long long)r->kv_pool_tokens);
	}
	return 0;
}

/* ---- tiers: a mapping name -> limits ---- */

static const struct fg_field tier_fields[] = {
	DBL("weight", struct fg_tier, weight, 0, 1e6, GT),
	UINT("max_context", struct fg_tier, max_context, 1, 1e9, 0),
	UINT("kv_cap_tokens", struct fg_tier, kv_cap_tokens, 1, 1e12, 0),
	DBL("burst_s", struct fg_tier, burst_s, 0, 86400, GT),
	DBL("max_queue_s", struct fg_tier, max_queue_s, 0, 3600, 0),
	NUM("priority", FG_K_INT, struct fg_tier, priority, -1e6, 1e6, 0),
	UINT("default_max_tokens", struct fg_tier, default_max_tokens, 1, 1e9, 0),
	DBL("tpot_p99_ms", struct fg_tier, tpot_p99_ms, 0, 60000, GT),
};
static const struct fg_schema tier_schema = SCHEMA(tier_fields);

static int check_tier(struct fg_pctx *c, const struct fg_ynode *m, const struct fg_tier *t,
		      const char *path)
{
	uint64_t pool = c->p->replica.kv_pool_tokens;

	if (t->max_context > t->kv_cap_tokens)
		return fg_pfail(c, at_either(m, "max_context", "kv_cap_tokens"),
				"%s: max_context %llu exceeds kv_cap_tokens %llu, so its longest requests could never be admitted",
				path, (unsigned long long)t->max_context,
				(unsigned long long)t->kv_cap_tokens);
	if (t->kv_cap_tokens > pool)
		return fg_pfail(c, at_key(m, "kv_cap_tokens"),
				"%s: kv_cap_tokens %llu exceeds the replica's kv_pool_tokens %llu",
				path, (unsigned long long)t->kv_cap_tokens, (unsigned long long)pool);
	if (t->default_max_tokens > t->max_context)
		return fg_pfail(c, at_key(m, "default_max_tokens"),
				"%s: default_max_tokens %u exceeds max_context %llu", path,
				t->default_max_tokens, (unsigned long long)t->max_context);
	if (t->tpot_p99_ms > 0) {
		/* a target one sequence of the tier's longest context misses alone
		 * cannot be kept by any cap on the batch */
		struct fg_cost_model cm;
		fg_cost_model_init(&cm, &c->p->replica);
		double alone = fg_batch_step_s(&cm, 1, (double)t->max_context, 0);
		if (alone * 1e3 > t->tpot_p99_ms)
			return fg_pfail(c, at_key(m, "tpot_p99_ms"),
					"%s: tpot_p99_ms %g is below the step time of one sequence at the tier's max_context %llu (%.2f ms on the replica's cost model): no cap on the batch can keep it; raise it, or lower max_context",
					path, t->tpot_p99_ms, (unsigned long long)t->max_context, alone * 1e3);
	}
	return 0;
}

static int decode_tiers(struct fg_pctx *c, const struct fg_ynode *v, void *base,
			const char *path)
{
	struct fg_policy *p = base;
	char sub[FG_PATH_TEXT], q[64];

	if (fg_expect(c, v, FG_Y_MAP, path))
		return -1;
	if (fg_ymap_len(v) == 0)
		return fg_pfail(c, v, "tiers must define at least one tier");
	if (fg_ymap_len(v) > FG_MAX_TIERS)
		return fg_pfail(c, fg_ymap_key(v, FG_MAX_TIERS), "more than %d tiers", FG_MAX_TIERS);
	for (size_t i = 0; i < fg_ymap_len(v); i++) {
		const struct fg_ynode *k = fg_ymap_key(v, i), *m = fg_ymap_val(v, i);
		struct fg_tier *t = &p->tiers[i];

		if (fg_decode_name(c, k, "tier name", t->name, sizeof(t->name)))
			return -1;
		for (size_t j = 0; j < i; j++)
			if (!strcmp(p->tiers[j].name, t->name))
				return fg_pfail(c, k, "duplicate tier %s (first at %u:%u)",
						fg_quote(k, q, sizeof(q)), fg_ymap_key(v, j)->line,
						fg_ymap_key(v, j)->col);
		fg_path(sub, sizeof(sub), "tiers.%s", t->name);
		t->weight = FG_TIER_DEFAULT_WEIGHT;
		t->max_context = FG_TIER_DEFAULT_MAX_CONTEXT;
		t->kv_cap_tokens = FG_TIER_DEFAULT_KV_CAP_TOKENS;
		t->burst_s = FG_TIER_DEFAULT_BURST_S;
		t->max_queue_s = FG_TIER_DEFAULT_MAX_QUEUE_S;
		if (fg_decode_map(c, m, &tier_schema, t, sub, NULL))
			return -1;
		if (!fg_ymap_get(m, "default_max_tokens"))
			t->default_max_tokens = t->max_context < FG_TIER_DEFAULT_MAX_TOKENS
				? (uint32_t)t->max_context : FG_TIER_DEFAULT_MAX_TOKENS;
		if (check_tier(c, m, t, sub))
			return -1;
		p->n_tiers = (uint32_t)i + 1;
	}
	return 0;
}

/* ---- tenants: a list, id = position ---- */

static int decode_tenant_tier(struct fg_pctx *c, const struct fg_ynode *v, void *base,
			      const char *path)
{
	struct fg_tenant *t = base;
	const char *names[FG_MAX_TIERS], *s;
	char q[64];

	if (fg_decode_string(c, v, path, &s))
		return -1;
	int idx = fg_policy_tier_by_name(c->p, s);
	if (idx >= 0) {
		t->tier = (uint32_t)idx;
		return 0;
	}
	for (uint32_t i = 0; i < c->p->n_tiers; i++)
		names[i] = c->p->tiers[i].name;
	const char *guess = fg_suggest(s, names, c->p->n_tiers);
	if (guess)
		return fg_pfail(c, v, "%s: unknown tier %s; did you mean '%s'?", path,
				fg_quote(v, q, sizeof(q)), guess);
	return fg_pfail(c, v, "%s: unknown tier %s (not defined under tiers)", path,
			fg_quote(v, q, sizeof(q)));
}

static int hex_nibble(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* "sha256:<64 hex>" into 32 bytes. Plaintext keys never belong in a policy. */
static int decode_key(struct fg_pctx *c, const struct fg_ynode *v, const char *path,
		      uint8_t out[32])
{
	const char *s;
	static const char prefix[] = "sha256:";

	if (fg_decode_string(c, v, path, &s))
		return -1;
	if (strncmp(s, prefix, sizeof(prefix) - 1) || v->len != sizeof(prefix) - 1 + 64)
		goto bad;
	s += sizeof(prefix) - 1;
	for (int i = 0; i < 32; i++) {
		int hi = hex_nibble(s[2 * i]), lo = hex_nibble(s[2 * i + 1]);
		if (hi < 0 || lo < 0)
			goto bad;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
bad:
	return fg_pfail(c, v, "%s must be \"sha256:\" and 64 hex digits, the SHA-256 of the API key (printf %%s KEY | sha256sum), never the key itself",
			path);
}

static int decode_keys(struct fg_pctx *c, const struct fg_ynode *v, void *base,
		       const char *path)
{
	struct fg_tenant *t = base;
	char item[FG_PATH_TEXT];

	if (fg_expect(c, v, FG_Y_SEQ, path))
		return -1;
	if (v->n > FG_MAX_KEYS)
		return fg_pfail(c, v->items[FG_MAX_KEYS], "%s has more than %d keys", path,
				FG_MAX_KEYS);
	for (size_t i = 0; i < v->n; i++) {
		fg_path(item, sizeof(item), "%s[%zu]", path, i);
		if (decode_key(c, v->items[i], item, t->keys[i]))
			return -1;
	}
	t->n_keys = (uint32_t)v->n;
	return 0;
}

static const struct fg_enum_name cache_modes[] = {
	{ "salted", FG_CACHE_SALTED }, { "shared", FG_CACHE_SHARED }, { NULL, 0 },
};

enum { TENANT_UNITS = 2, TENANT_REPLICAS = 3, TENANT_BURST = 4, TENANT_FLOOR = 8 };
static const struct fg_field tenant_fields[] = {
	STR("name", FG_K_NAME, struct fg_tenant, name, REQ),
	CUSTOM("tier", decode_tenant_tier, REQ),
	[TENANT_UNITS] = DBL("units_per_s", struct fg_tenant, units_per_s, 0, 1e12, GT),
	[TENANT_REPLICAS] = DBL("replicas", struct fg_tenant, replicas, 0, 1e6, GT),
	[TENANT_BURST] = DBL("burst_s", struct fg_tenant, burst_s, 0, 86400, GT),
	CUSTOM("keys", decode_keys, 0),
	LIST("sources", FG_K_CIDRS, struct fg_tenant, sources, n_sources, 0),
	ENUM("cache", struct fg_tenant, cache, cache_modes),
	[TENANT_FLOOR] = DBL("fleet_floor_units_per_s", struct fg_tenant, fleet_floor_units_per_s,
			     0, 1e12, 0),
};
static const struct fg_schema tenant_schema = SCHEMA(tenant_fields);

static int decode_tenant(struct fg_pctx *c, const struct fg_ynode *m, struct fg_tenant *t,
			 uint32_t id, const char *path)
{
	uint64_t seen = 0;

	memset(t, 0, sizeof(*t));
	t->id = id;
	t->cache = FG_CACHE_SALTED;
	if (fg_decode_map(c, m, &tenant_schema, t, path, &seen))
		return -1;
	bool units = seen & (1ull << TENANT_UNITS), replicas = seen & (1ull << TENANT_REPLICAS);
	if (units && replicas) {
		const struct fg_ynode *a = fg_ymap_key_node(m, "units_per_s");
		const struct fg_ynode *b = fg_ymap_key_node(m, "replicas");
		bool b_later = b->line > a->line || (b->line == a->line && b->col > a->col);
		return fg_pfail(c, b_later ? b : a,
				"%s (tenant '%s') sets both units_per_s and replicas; give exactly one",
				path, t->name);
	}
	if (!units && !replicas)
		return fg_pfail(c, m, "%s (tenant '%s') needs a quota: units_per_s or replicas",
				path, t->name);
	if (replicas) {
		struct fg_cost_model cm;
		fg_cost_model_init(&cm, &c->p->replica);
		t->units_per_s = fg_replicas_to_units(&cm, t->replicas);
	}
	if (!(seen & (1ull << TENANT_BURST)))
		t->burst_s = c->p->tiers[t->tier].burst_s;
	if (t->fleet_floor_units_per_s > t->units_per_s)
		return fg_pfail(c, fg_ymap_get(m, "fleet_floor_units_per_s"),
				"%s (tenant '%s'): fleet_floor_units_per_s %g exceeds the tenant's "
				"%g units/s; a node's floor is a part of the contract",
				path, t->name, t->fleet_floor_units_per_s, t->units_per_s);
	return 0;
}

/* Names seen so far, for duplicates: an open-addressing set of tenant ids
 * (fg_tenant_name_hash), so that 65,536 tenants are checked in one pass
 * rather than each against all before it. */
static int decode_tenants(struct fg_pctx *c, const struct fg_ynode *v, void *base,
			  const char *path)
{
	struct fg_policy *p = base;
	char sub[FG_PATH_TEXT], q[64];
	uint32_t *seen = NULL, mask = 0;
	int rc = -1;

	if (fg_expect(c, v, FG_Y_SEQ, path))
		return -1;
	if (v->n > FG_MAX_TENANTS)
		return fg_pfail(c, v->items[FG_MAX_TENANTS], "more than %d tenants (FG_MAX_TENANTS)",
				FG_MAX_TENANTS);
	if (fg_policy_alloc_tenants(p, (uint32_t)v->n))
		return fg_pfail(c, v, "out of memory for %zu tenants", v->n);
	if (v->n) {
		for (mask = 15; mask < 2 * v->n; mask = mask * 2 + 1)
			;
		seen = malloc(((size_t)mask + 1) * sizeof(*seen));
		if (!seen)
			return fg_pfail(c, v, "out of memory for %zu tenants", v->n);
		memset(seen, 0xff, ((size_t)mask + 1) * sizeof(*seen)); /* UINT32_MAX: empty */
	}
	for (size_t i = 0; i < v->n; i++) {
		fg_path(sub, sizeof(sub), "tenants[%zu]", i);
		if (decode_tenant(c, v->items[i], &p->tenants[i], (uint32_t)i, sub))
			goto out;
		uint32_t at = fg_tenant_name_hash(p->tenants[i].name) & mask;
		for (; seen[at] != UINT32_MAX; at = (at + 1) & mask) {
			size_t j = seen[at];
			if (strcmp(p->tenants[j].name, p->tenants[i].name))
				continue;
			const struct fg_ynode *name = fg_ymap_get(v->items[i], "name");
			fg_pfail(c, name, "duplicate tenant name %s (first at %u:%u)",
				 fg_quote(name, q, sizeof(q)), fg_ymap_get(v->items[j], "name")->line,
				 fg_ymap_get(v->items[j], "name")->col);
			goto out;
		}
		seen[at] = (uint32_t)i;
		p->n_tenants = (uint32_t)i + 1;
	}
	rc = 0;
out:
	free(seen);
	return rc;
}

/* ---- agent ---- */

static const struct fg_enum_name agent_modes[] = {
	{ "front", FG_MODE_FRONT }, { "transparent", FG_MODE_TRANSPARENT }, { NULL, 0 },
};
static const struct fg_enum_name xdp_modes[] = {
	{ "native", FG_XDP_NATIVE }, { "generic", FG_XDP_GENERIC }, { NULL, 0 },
};
static const struct fg_enum_name meterings[] = {
	{ "replica_time", FG_METER_REPLICA_TIME }, { "raw_tokens", FG_METER_RAW_TOKENS },
	{ "requests", FG_METER_REQUESTS }, { NULL, 0 },
};
static const struct fg_enum_name output_pricings[] = {
	{ "context", FG_OUTPUT_CONTEXT }, { "flat", FG_OUTPUT_FLAT }, { NULL, 0 },
};
static const struct fg_enum_name calib_modes[] = {
	{ "advise", FG_CALIB_ADVISE }, { "off", FG_CALIB_OFF }, { "on", FG_CALIB_ON }, { NULL, 0 },
};
static const struct fg_enum_name booleans[] = {
	{ "true", 1 }, { "false", 0 }, { NULL, 0 },
};
static const struct fg_enum_name schedulings[] = {
	{ "fcfs", FG_ENGINE_FCFS }, { "priority", FG_ENGINE_PRIORITY }, { NULL, 0 },
};

static const struct fg_field long_context_fields[] = {
	UINT("threshold", struct fg_agent, long_context_threshold, 1, 1e9, REQ),
	/* optional: without one, requests above the threshold are refused (400
	 * naming this pool's limit) instead of routed */
	STR("upstream", FG_K_HOSTPORT, struct fg_agent, long_context_upstream, 0),
};
static const struct fg_schema long_context_schema = SCHEMA(long_context_fields);

/* The proxy's timeouts (struct fg_agent, defaults in policy_defaults.c). */
static const struct fg_field timeouts_fields[] = {
	DBL("header_s", struct fg_agent, header_timeout_s, 0, 3600, GT),
	DBL("body_s", struct fg_agent, body_timeout_s, 0, 3600, GT),
	DBL("idle_s", struct fg_agent, idle_timeout_s, 0, 86400, GT),
	DBL("upstream_s", struct fg_agent, upstream_timeout_s, 0, 86400, GT),
	DBL("tokenize_s", struct fg_agent, tokenize_timeout_s, 0, 60, GT),
	DBL("request_s", struct fg_agent, request_timeout_s, 0, 604800, GT),
};
static const struct fg_schema timeouts_schema = SCHEMA(timeouts_fields);

/* `interfaces: auto` (wherever the default route of the agent's network
 * namespace goes: one ConfigMap for nodes whose NICs are named apart) or a
 * list of names. The word may be quoted, as the other keywords may (`off`,
 * the enums): JSON has no other way to write it. */
static const struct fg_field interface_list =
	LIST("interfaces", FG_K_IFACES, struct fg_agent, interfaces, n_interfaces, 0);

static int decode_interfaces(struct fg_pctx *c, const struct fg_ynode *v, void *base,
			     const char *path)
{
	struct fg_agent *a = base;
	char q[64];

	if (v->type == FG_Y_SCALAR && v->len == 4 && !memcmp(v->str, "auto", 4)) {
		a->interfaces_auto = true;
		a->n_interfaces = 0;
		return 0;
	}
	if (v->type != FG_Y_SEQ)
		return fg_pfail(c, v, "%s must be auto or a list of interface names, got %s", path,
				fg_quote(v, q, sizeof(q)));
	a->interfaces_auto = false;
	return fg_decode_value(c, v, &interface_list, base, path);
}

/* agent.passthrough: paths the proxy forwards at a fixed price. */
static int decode_pass_path(struct fg_pctx *c, const struct fg_ynode *v, void *base,
			    const char *path)
{
	struct fg_passthrough *e = base;
	char q[64];
	const char *s, *why;

	if (fg_decode_string(c, v, path, &s))
		return -1;
	size_t len = v->len;
	e->prefix = len && s[len - 1] == '*';
	if (e->prefix)
		len--;
	if (len >= sizeof(e->path))
		return fg_pfail(c, v, "%s %s is longer than %zu bytes", path, fg_quote(v, q, sizeof(q)),
				sizeof(e->path) - 1);
	if (memchr(s, '?', len) || memchr(s, '#', len))
		return fg_pfail(c, v, "%s %s: a path, without query or fragment", path,
				fg_quote(v, q, sizeof(q)));
	if ((why = fg_url_path_problem(s, len)))
		return fg_pfail(c, v, "%s %s: %s", path, fg_quote(v, q, sizeof(q)), why);
	if (memchr(s, '*', len))
		return fg_pfail(c, v, "%s %s: '*' may only end a path (a prefix)", path,
				fg_quote(v, q, sizeof(q)));
	if (!e->prefix && fg_route_is_builtin(s, len))
		return fg_pfail(c, v, "%s %s is an endpoint fairgate prices itself; it cannot be listed under agent.passthrough",
				path, fg_quote(v, q, sizeof(q)));
	memcpy(e->path, s, len);
	e->path[len] = 0;
	return 0;
}

static int decode_pass_methods(struct fg_pctx *c, const struct fg_ynode *v, void *base,
			       const char *path)
{
	struct fg_passthrough *e = base;
	char item[FG_PATH_TEXT], q[64];
	const char *s;

	if (fg_expect(c, v, FG_Y_SEQ, path))
		return -1;
	if (!v->n)
		return fg_pfail(c, v, "%s must name at least one method", path);
	for (size_t i = 0; i < v->n; i++) {
		fg_path(item, sizeof(item), "%s[%zu]", path, i);
		if (fg_decode_string(c, v->items[i], item, &s))
			return -1;
		uint32_t bit = fg_method_bit(s, v->items[i]->len);
		if (!bit)
			return fg_pfail(c, v->items[i], "%s %s is not a method (GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS)",
					item, fg_quote(v->items[i], q, sizeof(q)));
		if (e->methods & bit)
			return fg_pfail(c, v->items[i], "%s: %s is listed twice", item, s);
		e->methods |= bit;
	}
	return 0;
}


enum { PASS_UNITS = 2, PASS_AUTH = 3 };
static const struct fg_field pass_fields[] = {
	CUSTOM("path", decode_pass_path, REQ),
	CUSTOM("methods", decode_pass_methods, REQ),
	[PASS_UNITS] = DBL("units", struct fg_passthrough, units, 0, 1e9, REQ),
	[PASS_AUTH] = ENUM("auth", struct fg_passthrough, auth, booleans),
};
static const struct fg_schema pass_schema = SCHEMA(pass_fields);

static int decode_passthrough(struct fg_pctx *c, const struct fg_ynode *v, void *base,
			      const char *path)
{
	struct fg_agent *a = base;
	char sub[FG_PATH_TEXT];

	if (fg_expect(c, v, FG_Y_SEQ, path))
		return -1;
	if (v->n > FG_MAX_PASSTHROUGH)
		return fg_pfail(c, v->items[FG_MAX_PASSTHROUGH], "%s has more than %d entries", path,
				FG_MAX_PASSTHROUGH);
	for (size_t i = 0; i < v->n; i++) {
		struct fg_passthrough *e = &a->passthrough[i];
		const struct fg_ynode *m = v->items[i];
		uint64_t seen = 0;
		fg_path(sub, sizeof(sub), "%s[%zu]", path, i);
		memset(e, 0, sizeof(*e));
		e->auth = true;
		if (fg_decode_map(c, m, &pass_schema, e, sub, &seen))
			return -1;
		if (!e->auth && e->units > 0)
			return fg_pfail(c, fg_ymap_get(m, "units"),
					"%s: units %g on a path without auth: nobody could be charged (set auth: true or units: 0)",
					sub, e->units);
		for (size_t j = 0; j < i; j++)
			if (a->passthrough[j].prefix == e->prefix && !strcmp(a->passthrough[j].path, e->path))
				return fg_pfail(c, fg_ymap_get(m, "path"), "%s: path %s%s is listed twice",
						sub, e->path, e->prefix ? "*" : "");
		a->n_passthrough = (uint32_t)i + 1;
	}
	return 0;
}
/* agent.fleet.redis: HOST:PORT (a name is resolved by the grant thread, never
 * at start: the agent must start without DNS) or an absolute unix socket path. */
static int decode_fleet_redis(struct fg_pctx *c, const struct fg_ynode *v, void *base,
			      const char *path)
{
	struct fg_fleet_cfg *f = base;
	char q[64];
	const char *s;

	if (fg_decode_string(c, v, path, &s))
		return -1;
	if (s[0] == '/') {
		if (v->len >= sizeof(f->redis_unix))
			return fg_pfail(c, v, "%s: the socket path is too long", path);
		snprintf(f->redis_unix, sizeof(f->redis_unix), "%s", s);
		return 0;
	}
	struct fg_hostport hp;
	char why[128];
	if (s[0] == '[' || (s[0] >= '0' && s[0] <= '9')) {
		if (v->len >= FG_HOSTPORT_MAX || fg_parse_hostport(s, &hp, why, sizeof(why)))
			return fg_pfail(c, v, "%s %s: %s", path, fg_quote(v, q, sizeof(q)),
					v->len >= FG_HOSTPORT_MAX ? "too long" : why);
		snprintf(f->redis_host, sizeof(f->redis_host), "%s", hp.host);
		f->redis_port = hp.port;
		return 0;
	}
	const char *colon = strrchr(s, ':');
	char *end = NULL;
	unsigned long port = colon ? strtoul(colon + 1, &end, 10) : 0;
	size_t n = colon ? (size_t)(colon - s) : 0;
	if (!colon || !n || n >= sizeof(f->redis_host) || !end || *end || end == colon + 1 ||
	    port < 1 || port > 65535)
		return fg_pfail(c, v, "%s must be HOST:PORT (e.g. redis.fairgate.svc:6379 or "
				"10.0.0.5:6379) or an absolute unix socket path, got %s",
				path, fg_quote(v, q, sizeof(q)));
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
		      ch == '-' || ch == '.'))
			return fg_pfail(c, v, "%s: %s is not a host name", path,
					fg_quote(v, q, sizeof(q)));
	}
	memcpy(f->redis_host, s, n);
	f->redis_host[n] = '\0';
	f->redis_port = (uint16_t)port;
	return 0;
}

/* hiredis 0.14 (Debian 12) has no TLS: say so instead of sending the
 * password and the quotas in clear text to a server that expects TLS. */
static int decode_fleet_tls(struct fg_pctx *c, const struct fg_ynode *v, void *base,
			    const char *path)
{
	(void)base;
	return fg_pfail(c, v, "%s: TLS to Redis is not supported by this build (hiredis 0.14 has "
			"no TLS); reach Redis over a private network, a unix socket, or a local "
			"TLS tunnel (stunnel, a sidecar) and point agent.fleet.redis at its "
			"plain end", path);
}

static const struct fg_field fleet_fields[] = {
	CUSTOM("redis", decode_fleet_redis, REQ),
	STR("node", FG_K_NAME, struct fg_fleet_cfg, node, 0),
	DBL("period_s", struct fg_fleet_cfg, period_s, 0.05, 60, 0),
	DBL("buffer_s", struct fg_fleet_cfg, buffer_s, 0, 60, 0),
	DBL("node_timeout_s", struct fg_fleet_cfg, node_timeout_s, 1, 86400, 0),
	DBL("call_timeout_s", struct fg_fleet_cfg, call_timeout_s, 0.01, 10, 0),
	STR("password_file", FG_K_PATH, struct fg_fleet_cfg, password_file, 0),
	CUSTOM("tls", decode_fleet_tls, 0),
};
static const struct fg_schema fleet_schema = SCHEMA(fleet_fields);

/* agent.limits (struct fg_agent_limits). No field takes 0: a limit left out
 * is the default (policy_defaults.c) or derived by the agent at start. */
static const struct fg_field limits_fields[] = {
	UINT("max_connections", struct fg_agent_limits, max_connections, 1, 1 << 24, 0),
	UINT("max_connections_per_source", struct fg_agent_limits, max_connections_per_source, 1,
	     1 << 24, 0),
	UINT("max_buffered_bytes", struct fg_agent_limits, max_buffered_bytes, 1 << 20,
	     (double)(1ull << 33), 0),
	UINT("max_inflight_per_tenant", struct fg_agent_limits, max_inflight_per_tenant, 1,
	     1 << 20, 0),
};
static const struct fg_schema limits_schema = SCHEMA(limits_fields);

static const struct fg_field agent_fields[] = {
	ENUM("mode", struct fg_agent, mode, agent_modes),
	STR("listen", FG_K_HOSTPORT, struct fg_agent, listen, 0),
	STR("engine", FG_K_HOSTPORT, struct fg_agent, engine, 0),
	LIST("protected_ports", FG_K_PORTS, struct fg_agent, protected_ports, n_protected_ports, 0),
	CUSTOM("interfaces", decode_interfaces, 0),
	ENUM("xdp_mode", struct fg_agent, xdp_mode, xdp_modes),
	DBL("deny_allowance_per_s", struct fg_agent, deny_allowance_per_s, 0, 1e6, 0),
	DBL("shed_rst_per_s", struct fg_agent, shed_rst_per_s, 0, 1e7, GT | FG_F_OFF),
	STR("metrics_listen", FG_K_HOSTPORT, struct fg_agent, metrics_listen, FG_F_OFF),
	LIST("trusted_proxies", FG_K_CIDRS, struct fg_agent, trusted_proxies, n_trusted_proxies, 0),
	SUB("long_context", 0, long_context_schema, 0),
	DBL("engine_queue_steps", struct fg_agent, engine_queue_steps, 0, 1000, GT),
	ENUM("metering", struct fg_agent, metering, meterings),
	ENUM("output_pricing", struct fg_agent, output_pricing, output_pricings),
	ENUM("calibration", struct fg_agent, calibration, calib_modes),
	ENUM("engine_scheduling", struct fg_agent, engine_scheduling, schedulings),
	UINT("max_body_bytes", struct fg_agent, max_body_bytes, 1024, 1 << 30, 0),
	DBL("kv_headroom", struct fg_agent, kv_headroom, 0, 1, GT),
	DBL("peak_window_s", struct fg_agent, peak_window_s, 0, 86400, GT),
	STR("salt_secret_file", FG_K_PATH, struct fg_agent, salt_secret_file, 0),
	SUB("timeouts", 0, timeouts_schema, 0),
	ENUM("steer_fail_open", struct fg_agent, steer_fail_open, booleans),
	CUSTOM("passthrough", decode_passthrough, 0),
	SUB("fleet", offsetof(struct fg_agent, fleet), fleet_schema, 0),
	SUB("limits", offsetof(struct fg_agent, limits), limits_schema, 0),
	STR("engine_api_key_file", FG_K_PATH, struct fg_agent, engine_api_key_file, 0),
	STR("metrics_token_file", FG_K_PATH, struct fg_agent, metrics_token_file, 0),
	UINT("workers", struct fg_agent, workers, 0, FG_MAX_WORKERS, 0),
};
static const struct fg_schema agent_schema = SCHEMA(agent_fields);

static bool is_wildcard(const char *host)
{
	return !strcmp(host, "0.0.0.0") || !strcmp(host, "::");
}

/* Two sockets this agent binds or dials that would be the same one. */
static bool same_endpoint(const struct fg_hostport *a, const struct fg_hostport *b)
{
	return a->port == b->port &&
	       (!strcmp(a->host, b->host) || is_wildcard(a->host) || is_wildcard(b->host));
}

/* The limits against each other and against the body limit, whatever order
 * the keys came in. */
static int check_limits(struct fg_pctx *c, const struct fg_ynode *agent, const struct fg_agent *a)
{
	const struct fg_ynode *v = fg_ymap_get(agent, "limits");
	const struct fg_agent_limits *l = &a->limits;

	if (!v)
		return 0;
	if (l->max_connections && fg_ymap_get(v, "max_connections_per_source") &&
	    l->max_connections_per_source > l->max_connections)
		return fg_pfail(c, fg_ymap_get(v, "max_connections_per_source"),
				"agent.limits.max_connections_per_source %u exceeds agent.limits.max_connections %u",
				l->max_connections_per_source, l->max_connections);
	/* the largest body the agent accepts must fit in what it may hold */
	if (l->max_buffered_bytes && l->max_buffered_bytes < a->max_body_bytes)
		return fg_pfail(c, fg_ymap_get(v, "max_buffered_bytes"),
				"agent.limits.max_buffered_bytes %llu is below agent.max_body_bytes %llu: the largest body allowed could never be held",
				(unsigned long long)l->max_buffered_bytes,
				(unsigned long long)a->max_body_bytes);
	return 0;
}

static int decode_agent(struct fg_pctx *c, const struct fg_ynode *v, void *base,
			const char *path)
{
	struct fg_agent *a = &((struct fg_policy *)base)->agent;

	if (fg_decode_map(c, v, &agent_schema, a, path, NULL))
		return -1;
	const struct fg_ynode *fleet = fg_ymap_get(v, "fleet");
	a->fleet.enabled = fleet != NULL;
	/* a silent node keeps its fallback share until presumed gone: that must
	 * outlast the 2T in which it still uses its last lease */
	if (fleet && a->fleet.node_timeout_s < 3 * a->fleet.period_s)
		return fg_pfail(c, at_either(fleet, "node_timeout_s", "period_s"),
				"agent.fleet.node_timeout_s %g must be at least 3 x period_s (%g s)",
				a->fleet.node_timeout_s, 3 * a->fleet.period_s);
	/* Transparent mode: the engine keeps the protected port and steer hands
	 * connections to the agent's socket wherever it is, so without a
	 * `listen` the agent takes an ephemeral loopback port ("" = that). */
	if (a->mode == FG_MODE_TRANSPARENT && !fg_ymap_get(v, "listen")) {
		a->listen.host[0] = '\0';
		a->listen.port = 0;
	}
	if (a->mode == FG_MODE_TRANSPARENT && a->listen.port)
		for (uint32_t i = 0; i < a->n_protected_ports; i++)
			if (a->protected_ports[i] == a->listen.port)
				return fg_pfail(c, at_either(v, "listen", "protected_ports"),
						"agent.listen %s:%u: in transparent mode the engine listens on the protected port %u; give the agent another port, or no listen at all (an ephemeral loopback port)",
						a->listen.host, a->listen.port, a->listen.port);
	if (a->mode == FG_MODE_FRONT && same_endpoint(&a->listen, &a->engine))
		return fg_pfail(c, at_either(v, "engine", "listen"),
				"agent.engine %s:%u is the agent's own listen address; the proxy would forward to itself",
				a->engine.host, a->engine.port);
	if (check_limits(c, v, a))
		return -1;
	if (a->metrics_token_file[0] && !a->metrics_listen.host[0])
		return fg_pfail(c, at_either(v, "metrics_token_file", "metrics_listen"),
				"agent.metrics_token_file is set but agent.metrics_listen is off: there is no /metrics to guard");
	if (a->metrics_listen.host[0] && same_endpoint(&a->listen, &a->metrics_listen))
		return fg_pfail(c, at_either(v, "metrics_listen", "listen"),
				"agent.metrics_listen %s:%u collides with agent.listen %s:%u",
				a->metrics_listen.host, a->metrics_listen.port, a->listen.host,
				a->listen.port);
	return 0;
}

static const struct fg_field root_fields[] = {
	CUSTOM("replica", decode_replica, 0),
	CUSTOM("tiers", decode_tiers, REQ),
	CUSTOM("tenants", decode_tenants, REQ),
	CUSTOM("agent", decode_agent, 0),
};
const struct fg_schema fg_policy_schema = SCHEMA(root_fields);
