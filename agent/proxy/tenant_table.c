/* tenant_table.c — the proxy's tenant table, outcome counters and publishing the
 * gateway's per-tenant state to the kernel; see tenant_table.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "agent/kernel/kernel.h"
#include "agent/proxy/tenant_table.h"

/* A window that moved by less than this is not worth a map write. */
#define DENY_REPUBLISH_SLACK_NS 20000000ull

const char *const fg_outcome_names[FG_OUT_N] = {
	[FG_OUT_OK] = "ok",
	[FG_OUT_RATE_LIMITED] = "rate_limited",
	[FG_OUT_NEVER_FITS] = "never_fits",
	[FG_OUT_BAD_REQUEST] = "bad_request",
	[FG_OUT_CLIENT_GONE] = "client_gone",
	[FG_OUT_ENGINE_ERROR] = "engine_error",
	[FG_OUT_ENGINE_REJECTED] = "engine_rejected",
	[FG_OUT_UNMETERED] = "unmetered",
	[FG_OUT_QUEUE_TIMEOUT] = "queue_timeout",
	[FG_OUT_CONTEXT_EXCEEDED] = "context_exceeded",
	[FG_OUT_KV_NEVER] = "kv_never",
	[FG_OUT_TENANT_GONE] = "tenant_gone",
	[FG_OUT_CLIENT_STALLED] = "client_stalled",
	[FG_OUT_REQUEST_TIMEOUT] = "request_timeout",
	[FG_OUT_INFLIGHT_LIMITED] = "inflight_limited",
};

bool fg_outcome_is_refusal(enum fg_outcome o)
{
	switch (o) {
	case FG_OUT_RATE_LIMITED:
	case FG_OUT_NEVER_FITS:
	case FG_OUT_BAD_REQUEST:
	case FG_OUT_QUEUE_TIMEOUT:
	case FG_OUT_CONTEXT_EXCEEDED:
	case FG_OUT_KV_NEVER:
	case FG_OUT_TENANT_GONE:
	case FG_OUT_INFLIGHT_LIMITED:
		return true;
	default:
		return false;
	}
}

int fg_tenants_init(struct fg_tenant_table *q, struct fg_gateway *gw, const char *secret_path, char *err,
		  size_t errlen)
{
	memset(q, 0, sizeof(*q));
	q->gw = gw;
	fg_link_init(&q->denied);
	if (fg_salt_secret_load(secret_path, &q->secret, err, errlen))
		return -1;
	q->have_secret = true;
	return 0;
}

static void free_tenant(struct fg_tenant_rt *t)
{
	fg_link_del(&t->deny_link);
	free(t);
}

/* The window this agent published for t (0: none), and t on the tick's
 * list while there is one. */
static void set_published(struct fg_tenant_table *q, struct fg_tenant_rt *t, uint64_t until)
{
	t->deny_published_ns = until;
	if (!until)
		fg_link_del(&t->deny_link);
	else if (fg_link_empty(&t->deny_link))
		fg_link_add(&q->denied, &t->deny_link);
}

void fg_tenants_free(struct fg_tenant_table *q)
{
	for (uint32_t i = 0; i < q->n; i++)
		free_tenant(q->by_id[i]);
	while (q->retired) {
		struct fg_tenant_rt *t = q->retired;
		q->retired = t->next_retired;
		free_tenant(t);
	}
	free(q->by_id);
	free(q->keys);
	free(q->names);
	memset(&q->secret, 0, sizeof(q->secret));
	memset(q, 0, sizeof(*q));
}

/* A key's SHA-256 is uniform, but the policy file writes the hashes and
 * may carry any hex (a generated file of near-equal ones put 65,533 keys
 * in one probe run when the slot was the first four bytes): every byte
 * counts, mixed. */
static uint32_t key_hash(const uint8_t h[32])
{
	uint64_t w[4], v;

	memcpy(w, h, sizeof(w));
	v = (w[0] ^ w[1] * 0x9e3779b97f4a7c15ull) ^ (w[2] ^ w[3] * 0xc2b2ae3d27d4eb4full);
	v ^= v >> 31;
	v *= 0xbf58476d1ce4e5b9ull;
	return (uint32_t)(v ^ v >> 29);
}

static int build_key_index(const struct fg_policy *p, struct fg_tenant_rt **by_id,
			   struct fg_key_slot **out, uint32_t *mask_out)
{
	uint32_t nkeys = 0, cap = 16;

	for (uint32_t i = 0; i < p->n_tenants; i++)
		nkeys += p->tenants[i].n_keys;
	while (cap < 2 * nkeys)
		cap *= 2;
	struct fg_key_slot *slots = calloc(cap, sizeof(*slots));
	if (!slots)
		return -1;
	for (uint32_t i = 0; i < p->n_tenants; i++) {
		const struct fg_tenant *pt = &p->tenants[i];
		for (uint32_t k = 0; k < pt->n_keys && k < FG_MAX_KEYS; k++) {
			uint32_t s = key_hash(pt->keys[k]) & (cap - 1);
			while (slots[s].t && memcmp(slots[s].hash, pt->keys[k], 32))
				s = (s + 1) & (cap - 1);
			if (slots[s].t)
				continue; /* the same key twice: the first tenant keeps it */
			memcpy(slots[s].hash, pt->keys[k], 32);
			slots[s].t = by_id[i];
		}
	}
	*out = slots;
	*mask_out = cap - 1;
	return 0;
}

/* by_id[i] under the policy's name of tenant i (names are unique). */
static int build_name_index(const struct fg_policy *p, struct fg_tenant_rt **by_id,
			    struct fg_tenant_rt ***out, uint32_t *mask_out)
{
	uint32_t cap = 16;

	while (cap < 2 * p->n_tenants)
		cap *= 2;
	struct fg_tenant_rt **slots = calloc(cap, sizeof(*slots));
	if (!slots)
		return -1;
	for (uint32_t i = 0; i < p->n_tenants; i++) {
		uint32_t s = fg_tenant_name_hash(p->tenants[i].name) & (cap - 1);
		while (slots[s])
			s = (s + 1) & (cap - 1);
		slots[s] = by_id[i];
	}
	*out = slots;
	*mask_out = cap - 1;
	return 0;
}

static void configure(struct fg_tenant_table *q, struct fg_tenant_rt *t, const struct fg_policy *p,
		      uint32_t id)
{
	const struct fg_tenant *pt = &p->tenants[id];
	const struct fg_tier *tier = pt->tier < p->n_tiers ? &p->tiers[pt->tier] : NULL;

	snprintf(t->name, sizeof(t->name), "%s", pt->name);
	t->id = id;
	t->tier = pt->tier;
	t->live = true;
	t->priority = tier ? tier->priority : 0;
	/* a salt is the table's secret and the name: a tenant kept by a reload
	 * (matched by name) keeps its own rather than an HMAC per tenant per
	 * reload (a quarter of a 65,536-tenant reload's time) */
	bool keep_salt = t->salted && t->salt[0];
	t->salted = pt->cache == FG_CACHE_SALTED;
	if (keep_salt && t->salted)
		return;
	t->salt[0] = 0;
	if (t->salted && (!q->have_secret || fg_salt_for_tenant(&q->secret, t->name, t->salt)))
		t->salt[0] = 0; /* never reached: apply refuses salted tenants without a salt */
}

int fg_tenants_apply(struct fg_tenant_table *q, const struct fg_policy *p)
{
	uint32_t n = p->n_tenants;
	struct fg_tenant_rt **by_id = calloc(n ? n : 1, sizeof(*by_id));
	bool *reused = calloc(q->n ? q->n : 1, sizeof(*reused));
	bool *fresh = calloc(n ? n : 1, sizeof(*fresh));
	struct fg_key_slot *keys = NULL;
	struct fg_tenant_rt **names = NULL;
	uint32_t mask = 0, name_mask = 0;

	if (!by_id || !reused || !fresh)
		goto oom;
	for (uint32_t i = 0; i < n; i++) {
		/* the old table's name index: one lookup per tenant */
		struct fg_tenant_rt *was = fg_tenants_by_name(q, p->tenants[i].name);
		if (was && was->id < q->n && q->by_id[was->id] == was && !reused[was->id]) {
			by_id[i] = was;
			reused[was->id] = true;
		}
		if (!by_id[i]) {
			by_id[i] = calloc(1, sizeof(**by_id));
			if (!by_id[i])
				goto oom;
			fg_link_init(&by_id[i]->deny_link);
			fresh[i] = true;
		}
	}
	if (build_key_index(p, by_id, &keys, &mask) ||
	    build_name_index(p, by_id, &names, &name_mask)) {
		free(keys);
		goto oom;
	}

	/* nothing can fail from here on: commit */
	for (uint32_t i = 0; i < n; i++)
		configure(q, by_id[i], p, i);
	for (uint32_t j = 0; j < q->n; j++) {
		if (reused[j])
			continue;
		struct fg_tenant_rt *gone = q->by_id[j];
		gone->live = false;
		fg_link_del(&gone->deny_link); /* publish skips it now */
		if (gone->refs) {
			gone->next_retired = q->retired;
			q->retired = gone;
		} else {
			free_tenant(gone);
		}
	}
	free(q->by_id);
	free(q->keys);
	q->by_id = by_id;
	q->n = n;
	q->keys = keys;
	q->key_mask = mask;
	free(q->names);
	q->names = names;
	q->name_mask = name_mask;
	free(reused);
	free(fresh);
	return 0;

oom:
	for (uint32_t i = 0; by_id && i < n; i++)
		if (fresh && fresh[i])
			free(by_id[i]);
	free(by_id);
	free(reused);
	free(fresh);
	return -1;
}

struct fg_tenant_rt *fg_tenants_by_key(const struct fg_tenant_table *q, const uint8_t hash[32])
{
	if (!q->keys)
		return NULL;
	uint32_t s = key_hash(hash) & q->key_mask;
	while (q->keys[s].t) {
		if (!memcmp(q->keys[s].hash, hash, 32))
			return q->keys[s].t;
		s = (s + 1) & q->key_mask;
	}
	return NULL;
}

struct fg_tenant_rt *fg_tenants_by_name(const struct fg_tenant_table *q, const char *name)
{
	if (!q->names)
		return NULL;
	for (uint32_t s = fg_tenant_name_hash(name) & q->name_mask; q->names[s]; s = (s + 1) & q->name_mask)
		if (!strcmp(q->names[s]->name, name))
			return q->names[s];
	return NULL;
}

void fg_tenant_ref(struct fg_tenant_rt *t)
{
	t->refs++;
}

void fg_tenant_unref(struct fg_tenant_table *q, struct fg_tenant_rt *t)
{
	if (--t->refs || t->live)
		return;
	for (struct fg_tenant_rt **pp = &q->retired; *pp; pp = &(*pp)->next_retired) {
		if (*pp == t) {
			*pp = t->next_retired;
			break;
		}
	}
	free_tenant(t);
}

void fg_tenants_count(struct fg_tenant_rt *t, enum fg_outcome o)
{
	t->outcomes[o]++;
	if (fg_outcome_is_refusal(o))
		t->rejected++;
}

void fg_tenants_charged(struct fg_tenant_rt *t, double units)
{
	t->units_billed += units;
}

void fg_tenants_ended(struct fg_tenant_rt *t, double reserved, double billed, enum fg_outcome o)
{
	fg_tenants_count(t, o);
	t->settled++;
	t->units_billed += billed;
	if (reserved > billed)
		t->units_refunded += reserved - billed;
}

void fg_tenants_publish(struct fg_agent_state *st, struct fg_tenant_table *q, struct fg_tenant_rt *t,
		      uint64_t now_ns)
{
	struct fg_gateway *gw = q->gw;

	if (!t->live || !st->kernel || !gw || t->id >= gw->n_tenants)
		return;
	struct fg_gw_tenant *g = &gw->t[t->id];
	uint32_t queued = gw->fq.t[t->id].queued;
	struct fg_tenant_pub pub = {
		.settled = t->settled,
		.written_off = t->written_off,
		.long_context = t->long_context,
		.timed_out = g->timed_out,
		.exact_counts = g->exact_counts,
		.cut_off = g->cut_off,
		.usage_clamped = g->usage_clamped,
		.units_billed = t->units_billed,
		.units_refunded = t->units_refunded,
		.units_written_off = t->units_written_off,
		.output_tokens_billed = g->billed_output_tokens,
		.output_units_billed = g->billed_output_units,
		.typical_cost = g->typical_cost,
		.bucket_units = fg_bucket_level(&g->bucket, now_ns),
		.rate_units_per_s = g->bucket.rate,
		.burst_units = g->bucket.depth,
		.reserved_units = g->reserved_units,
		.kv_resident_tokens = gw->kv.reserved[t->id],
		.kv_cap_tokens = gw->kv.cap[t->id],
		.inflight = g->inflight > queued ? g->inflight - queued : 0, /* sent, not waiting */
		.queued = queued,
		.admitted = g->admitted,
		.rejected = t->rejected,
	};
	memcpy(pub.outcomes, t->outcomes, sizeof(t->outcomes));
	fg_kernel_publish_tenant(st, t->id, &pub);

	/* a window in force that is not the one this agent published belongs to
	 * the operator (fairgatectl tenant deny): leave it alone */
	uint64_t in_force = 0;
	if (fg_kernel_get_deny(st, t->id, &in_force) != FG_VERDICT_ALLOW &&
	    in_force != t->deny_published_ns)
		return;
	uint64_t until = fg_gw_deny_until(gw, t->id, now_ns);
	if (until) {
		uint64_t was = t->deny_published_ns;
		if (!was || until > was + DENY_REPUBLISH_SLACK_NS ||
		    until + DENY_REPUBLISH_SLACK_NS < was) {
			fg_kernel_set_deny_from(st, t->id, until, FG_VERDICT_DELAY, FG_DENY_QUOTA);
			set_published(q, t, until);
		}
	} else if (t->deny_published_ns) {
		if (t->deny_published_ns > now_ns) /* refilled early (refunds): close it now */
			fg_kernel_set_deny_from(st, t->id, 0, FG_VERDICT_ALLOW, FG_DENY_QUOTA);
		set_published(q, t, 0);
	}
}

_Static_assert(FG_OUT_N <= FG_QUOTA_OUTCOMES, "the pinned books have a slot per outcome");

uint32_t fg_tenants_restore(struct fg_agent_state *st, struct fg_tenant_table *q)
{
	struct fg_gateway *gw = q->gw;
	uint32_t restored = 0, lost = 0;
	double lost_units = 0;

	for (uint32_t i = 0; gw && i < q->n; i++) {
		struct fg_tenant_rt *t = q->by_id[i];
		struct fg_tenant_pub was;

		if (!t->live || t->id >= gw->n_tenants || !fg_kernel_read_pub(st, t->id, &was, NULL))
			continue;
		struct fg_gw_tenant *g = &gw->t[t->id];
		memcpy(t->outcomes, was.outcomes, sizeof(t->outcomes));
		t->rejected = was.rejected;
		t->settled = was.settled;
		t->long_context = was.long_context;
		t->units_billed = was.units_billed;
		t->units_refunded = was.units_refunded;
		t->written_off = was.written_off;
		t->units_written_off = was.units_written_off;
		g->admitted = was.admitted;
		g->timed_out = was.timed_out;
		g->exact_counts = was.exact_counts;
		g->cut_off = was.cut_off;
		g->usage_clamped = was.usage_clamped;
		g->billed_output_tokens = was.output_tokens_billed;
		g->billed_output_units = was.output_units_billed;
		g->typical_cost = was.typical_cost;
		/* Requests the dead agent had admitted and not settled: their
		 * reservation left the bucket at admission and the level comes
		 * back without it, so they stay billed as reserved (a refund
		 * would give back work the engine may have done); counted so
		 * that admitted = settled + written_off + in flight. */
		uint32_t open = was.inflight + was.queued;
		if (open || was.reserved_units > 0) {
			t->written_off += open;
			t->units_written_off += was.reserved_units;
			t->units_billed += was.reserved_units;
			lost += open;
			lost_units += was.reserved_units;
		}
		/* A window the quota controller opened is this agent's now: it
		 * closes it early on refunds and extends it as the bucket says.
		 * The operator's stays the operator's. */
		uint64_t until = 0;
		int source = FG_DENY_NONE;
		if (fg_kernel_get_deny_from(st, t->id, &until, &source) != FG_VERDICT_ALLOW &&
		    source == FG_DENY_QUOTA) {
			set_published(q, t, until);
			g->deny_until_ns = until;
		}
		restored++;
	}
	if (restored)
		fprintf(stderr, "fairgated: books of %u tenant(s) restored from the pinned tenants map; "
			"%u request(s) in flight at the previous agent's end written off, billed as "
			"reserved (%.0f units)\n", restored, lost, lost_units);
	return restored;
}

void fg_tenants_tick(struct fg_agent_state *st, struct fg_tenant_table *q, uint64_t now_ns)
{
	/* a publish may close the window and take t off the list: the next
	 * is read first */
	for (struct fg_link *l = q->denied.next, *next; l != &q->denied; l = next) {
		next = l->next;
		fg_tenants_publish(st, q, fg_container_of(l, struct fg_tenant_rt, deny_link), now_ns);
	}
}
