/* fuzz_policy.c — libFuzzer target: the policy parser (YAML and JSON, one
 * parser) on arbitrary bytes.
 *
 * Invariants: the parser answers 0 or -1; a refusal carries a message and a
 * position inside the input (line within the input's line breaks, column
 * within its length); a policy it accepts is one every consumer can use:
 * counts within the fixed arrays, tenants pointing at real tiers with
 * unique names and their own ids, the schema's ranges and cross-key rules
 * held, and a cost model built from it that prices with finite, positive
 * numbers. */
#include <math.h>
#include <string.h>
#include <sys/socket.h>

#include "policy/cost_model.h"
#include "policy/policy.h"
#include "selftests/fuzz/fuzz_common.h"

static struct fg_policy policy; /* ~1 MB: too big for the stack */

static bool nul_terminated(const char *s, size_t cap)
{
	return memchr(s, 0, cap) != NULL;
}

/* libyaml counts \n, \r, \r\n and the Unicode breaks NEL, LS, PS as line
 * ends; counting every byte that can belong to one bounds its line. */
static unsigned max_line(const uint8_t *d, size_t n)
{
	unsigned lines = 1;

	for (size_t i = 0; i < n; i++)
		if (d[i] == '\n' || d[i] == '\r' || d[i] == 0x85 || d[i] == 0xa8 || d[i] == 0xa9)
			lines++;
	return lines;
}

static void check_error(const uint8_t *data, size_t size, const struct fg_policy_error *err)
{
	char line[1024];

	FUZZ_CHECK(nul_terminated(err->message, sizeof(err->message)), "message not terminated");
	FUZZ_CHECK(err->message[0], "refusal without a message");
	FUZZ_CHECK(err->line >= 1, "refusal without a position: %s", err->message);
	FUZZ_CHECK(err->line <= max_line(data, size), "line %u past the input (%zu bytes): %s",
		   err->line, size, err->message);
	FUZZ_CHECK(err->col >= 1 && err->col <= size + 1, "column %u outside %zu bytes: %s",
		   err->col, size, err->message);
	fg_policy_error_format(err, line, sizeof(line));
	FUZZ_CHECK(!strncmp(line, "fuzz.yaml:", 10), "formatted error: %s", line);
}

static void check_cidr(const struct fg_cidr *c)
{
	FUZZ_CHECK(c->family == AF_INET || c->family == AF_INET6, "family %u", c->family);
	FUZZ_CHECK(c->prefixlen <= (c->family == AF_INET ? 32 : 128), "prefix /%u", c->prefixlen);
}

static bool finite_in(double v, double lo, double hi)
{
	return isfinite(v) && v >= lo && v <= hi;
}

static void check_policy(const struct fg_policy *p)
{
	const struct fg_replica *r = &p->replica;

	FUZZ_CHECK(nul_terminated(r->model.name, sizeof(r->model.name)), "model name");
	FUZZ_CHECK(r->gpus >= 1 && r->model.layers >= 1 && r->model.kv_heads >= 1 &&
			   r->model.head_dim >= 1, "replica integers");
	FUZZ_CHECK((double)r->decode_batch * r->decode_context <= (double)r->kv_pool_tokens,
		   "pricing batch %u x %u does not fit the pool %llu", r->decode_batch,
		   r->decode_context, (unsigned long long)r->kv_pool_tokens);

	FUZZ_CHECK(p->n_tiers <= FG_MAX_TIERS, "n_tiers %u", p->n_tiers);
	for (uint32_t i = 0; i < p->n_tiers; i++) {
		const struct fg_tier *t = &p->tiers[i];
		FUZZ_CHECK(nul_terminated(t->name, sizeof(t->name)) && t->name[0], "tier name");
		FUZZ_CHECK(finite_in(t->weight, 0, 1e6) && t->weight > 0, "tier weight %g", t->weight);
		FUZZ_CHECK(finite_in(t->burst_s, 0, 86400) && t->burst_s > 0, "tier burst %g", t->burst_s);
		FUZZ_CHECK(finite_in(t->max_queue_s, 0, 3600), "tier max_queue_s %g", t->max_queue_s);
		FUZZ_CHECK(t->max_context >= 1 && t->max_context <= t->kv_cap_tokens,
			   "tier %s: max_context %llu vs kv cap %llu", t->name,
			   (unsigned long long)t->max_context, (unsigned long long)t->kv_cap_tokens);
		FUZZ_CHECK(t->default_max_tokens <= t->max_context, "tier default_max_tokens");
		FUZZ_CHECK(fg_policy_tier_by_name(p, t->name) == (int)i, "tier names not unique");
	}

	FUZZ_CHECK(p->n_tenants <= FG_MAX_TENANTS, "n_tenants %u", p->n_tenants);
	FUZZ_CHECK(!p->n_tenants || p->n_tiers, "tenants without tiers");
	for (uint32_t i = 0; i < p->n_tenants; i++) {
		const struct fg_tenant *t = &p->tenants[i];
		FUZZ_CHECK(nul_terminated(t->name, sizeof(t->name)) && t->name[0], "tenant name");
		FUZZ_CHECK(t->id == i, "tenant %u has id %u", i, t->id);
		FUZZ_CHECK(t->tier < p->n_tiers, "tenant %s: tier %u of %u", t->name, t->tier,
			   p->n_tiers);
		FUZZ_CHECK(fg_policy_tenant_by_name(p, t->name) == t, "tenant names not unique");
		FUZZ_CHECK(isfinite(t->units_per_s) && t->units_per_s >= 0, "units_per_s %g",
			   t->units_per_s);
		FUZZ_CHECK(finite_in(t->burst_s, 0, 86400) && t->burst_s > 0, "burst_s %g", t->burst_s);
		FUZZ_CHECK(t->n_keys <= FG_MAX_KEYS && t->n_sources <= FG_MAX_SOURCES, "counts");
		FUZZ_CHECK(t->cache == FG_CACHE_SALTED || t->cache == FG_CACHE_SHARED, "cache mode");
		for (uint32_t k = 0; k < t->n_sources; k++)
			check_cidr(&t->sources[k]);
		for (uint32_t k = 0; k < t->n_keys; k++)
			FUZZ_CHECK(fg_policy_tenant_by_key_hash(p, t->keys[k]) == t,
				   "key of tenant %s resolves to another tenant", t->name);
	}

	const struct fg_agent *a = &p->agent;
	FUZZ_CHECK(a->n_protected_ports <= FG_MAX_PORTS && a->n_interfaces <= FG_MAX_IFACES &&
			   a->n_trusted_proxies <= FG_MAX_TRUSTED, "agent counts");
	for (uint32_t k = 0; k < a->n_trusted_proxies; k++)
		check_cidr(&a->trusted_proxies[k]);
	for (uint32_t k = 0; k < a->n_interfaces; k++)
		FUZZ_CHECK(nul_terminated(a->interfaces[k], sizeof(a->interfaces[k])), "iface name");
	FUZZ_CHECK(nul_terminated(a->salt_secret_file, sizeof(a->salt_secret_file)), "salt path");
	FUZZ_CHECK(nul_terminated(a->engine.host, sizeof(a->engine.host)), "engine host");

	/* What the agent does first with a new policy: price with it. */
	struct fg_cost_model cm;
	fg_cost_model_init(&cm, r);
	double step = fg_decode_step_s(&cm, r->decode_context);
	double units = fg_request_units(&cm, 1000, 0, 100);
	FUZZ_CHECK(isfinite(step) && step > 0, "decode step %g s", step);
	FUZZ_CHECK(isfinite(units) && units > 0, "1000-in 100-out request priced %g units", units);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fg_policy_error err;

	int rc = fg_policy_parse_buffer((const char *)data, size, "fuzz.yaml", &policy, &err);
	FUZZ_CHECK(rc == 0 || rc == -1, "rc %d", rc);
	if (rc)
		check_error(data, size, &err);
	else
		check_policy(&policy);
	return 0;
}
