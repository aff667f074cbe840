/* fleet_grant.h — a node's side of the fleet bucket (agent.fleet), as pure
 * logic with an explicit clock.
 *
 * Every node keeps admission local: the gateway's fg_bucket reserves and
 * settles exactly as on a single node. Under agent.fleet that bucket holds
 * a lease instead of the whole contract: it refills at the rate the fleet
 * bucket (Redis, agent/fleet/fleet_store.lua) handed this node, up to a hold cap
 * of what that rate is worth over a period, and takes units the fleet
 * grants at once when the node expects to spend more than its rate brings.
 * Once a period T (earlier when its level runs low or it refused a
 * request) the node reports what entered its bucket by refill and what it
 * billed since its last answered call, with a sequence number, and asks
 * again. The store charges the refill after the fact, so every unit a node
 * admits comes out of the fleet bucket.
 *
 * Rates (fg_fleet_rate), in order:
 *   unheard   no answer yet: the tenant's floor (a node that starts while
 *             the store is down does not open its bucket to the contract)
 *   lease     within 2T of the last answer: that answer's rate
 *   fallback  the store silent 2T: max(floor, contract / live nodes) from
 *             the last answer; the store reserves exactly this for a silent
 *             node, so the others share the rest
 *   floor     silent past node_timeout_s (the fleet presumes the node gone
 *             and gives its share away), or idle when the store went
 *             silent (the fleet reserved only the floor for it)
 * Every rate is at least FG_FLEET_MIN_SHARE of the contract, so admission
 * never sees a bucket that cannot refill (which it would answer "never
 * fits"); those slivers are in the bound below.
 *
 * Retries: a call that got no answer is sent again unchanged (same seq,
 * same figures) until one comes; the store answers a seq it has seen with
 * its first answer, so nothing is charged or granted twice. A new epoch
 * (the store lost its state, or another node recreated it) is adopted; the
 * store does not charge reports that belong to another epoch.
 */
#ifndef FAIRGATE_FLEET_GRANT_H
#define FAIRGATE_FLEET_GRANT_H

#include <stdbool.h>
#include <stdint.h>
#include "token_bucket.h"

#define FG_FLEET_EPOCH_MAX 96
#define FG_FLEET_MIN_SHARE 1e-3   /* of the contract: the least rate a node holds */
#define FG_FLEET_EARLY_LEVEL 0.25 /* call early under this share of the hold cap */
#define FG_FLEET_MIN_GAP 0.125    /* ... but at most once per this share of T */
#define FG_FLEET_BURST_GAP 0.02   /* refusals while the fleet has units to grant: this soon */
#define FG_FLEET_RETRY_GAP 0.25   /* a failed call is retried after this share of T */
#define FG_FLEET_IDLE_HOLD_S 0.1  /* no typical request yet: hold this many seconds of the contract */

/* One tenant's contract and the fleet's knobs (policy: tenants[] and
 * agent.fleet). */
struct fg_fleet_params {
	double rate;            /* units/s: the fleet bucket's refill, the contract */
	double depth;           /* units: burst_s x rate */
	double floor;           /* fleet_floor_units_per_s */
	double period_s;        /* T */
	double buffer_s;        /* held beyond a period's expected spend */
	double node_timeout_s;
};

enum fg_fleet_mode {
	FG_FLEET_UNHEARD = 0,
	FG_FLEET_LEASE,
	FG_FLEET_FALLBACK,
	FG_FLEET_FLOOR,
};
const char *fg_fleet_mode_name(enum fg_fleet_mode m);

/* What the gateway's books say about a tenant, cumulative (fg_gateway:
 * billed_units + reserved_units is what left its bucket for requests). */
struct fg_fleet_books {
	double consumed;        /* billed + reserved */
	double billed;
	double refused;         /* units priced and refused 429 */
	double refused_peak;    /* largest refused price since the glue last reset it */
	double typical_cost;    /* EWMA of admitted prices (0 = none yet) */
};

/* One call, frozen when first sent and resent unchanged after a failure. */
struct fg_fleet_call {
	uint64_t seq;
	char epoch[FG_FLEET_EPOCH_MAX]; /* the epoch this node last saw ("" = none) */
	double demand;          /* units/s wanted: EWMA of consumed + refused */
	double rate_now;        /* what the local bucket refills at */
	double refill;          /* units that entered by refill since the last answer */
	double usage;           /* units billed since the last answer */
	double want;            /* units asked for now */
	double has;             /* the local level */
	bool idle;              /* nothing used or refused since the last call */
	double ttl_s;           /* the store forgets the tenant after this long unheard */
	uint64_t sent_ns;
};

/* The store's answer (agent/fleet/fleet_store.lua's fg_grant). */
struct fg_fleet_answer {
	char epoch[FG_FLEET_EPOCH_MAX];
	double rate;            /* the lease */
	double units;           /* granted now */
	double fleet_level;     /* the fleet bucket after this call */
	double fleet_avail;     /* what was left to grant as units */
	double rate_eff;        /* the contract's rate, less a debt being paid back */
	uint32_t live_nodes;    /* nodes with a record for this tenant, this one included */
	bool learning;          /* the store is relearning after a loss: rates only */
	bool replayed;          /* the answer to a seq the store had seen */
	bool recreated;         /* this call found the bucket lost and made a new one */
	double demand_sum;
	double charged_total, usage_total;
	uint64_t recoveries;    /* losses the store has noticed for this tenant */
};

struct fg_fleet_tenant {
	/* the lease */
	double rate;            /* from the last answer */
	uint32_t live_nodes;
	uint64_t last_ok_ns;    /* when the last answer arrived; 0 = never */
	bool idle_declared;     /* the last answered call said idle */
	char epoch[FG_FLEET_EPOCH_MAX];
	uint64_t seq;           /* of the last answered call */
	/* measured */
	double demand;          /* EWMA, units/s */
	uint64_t sample_ns;
	double sample_consumed, sample_refused;
	double level_mark, consumed_mark, refused_mark; /* after the last observe */
	enum fg_fleet_mode shaped;         /* the mode the bucket's rate was last set for */
	double call_consumed, call_refused;/* at the last call */
	double billed_mark;
	double refill_unreported, usage_unreported;
	double refused_peak, refused_peak_prev;
	double backlog;         /* units refused since the last call */
	/* the call */
	bool in_flight, retry;
	struct fg_fleet_call call;
	uint64_t last_call_ns;  /* 0 = never */
	/* what happened, for fairgatectl fleet and the metrics */
	struct fg_fleet_answer last;
	uint64_t calls_ok, calls_failed, epoch_changes, replays;
	double units_granted, self_granted;
	double last_rtt_s;
};

/* Start: nothing heard, level_mark and the books as they are now. */
void fg_fleet_tenant_init(struct fg_fleet_tenant *ft, struct fg_bucket *b,
			  const struct fg_fleet_books *books, uint64_t now_ns);

enum fg_fleet_mode fg_fleet_mode_at(const struct fg_fleet_tenant *ft,
				    const struct fg_fleet_params *p, uint64_t now_ns);
/* The rate the local bucket refills at now. */
double fg_fleet_rate(const struct fg_fleet_tenant *ft, const struct fg_fleet_params *p,
		     uint64_t now_ns);
/* Where refill stops: what the rate brings over T + buffer, at least two
 * typical requests and the largest one refused lately, at most the depth. */
double fg_fleet_hold_cap(const struct fg_fleet_tenant *ft, const struct fg_fleet_params *p,
			 double rate, double typical_cost);
/* What the node holds for when idle: two typical requests. */
double fg_fleet_idle_hold(const struct fg_fleet_params *p, double typical_cost);

/* Account what the bucket did since the last observe: refill (charged to
 * the fleet at the next call; self-granted outside a lease) and demand.
 * Call before anything changes the bucket's rate, and before a call. */
void fg_fleet_observe(struct fg_fleet_tenant *ft, struct fg_bucket *b,
		      const struct fg_fleet_params *p, const struct fg_fleet_books *books,
		      uint64_t now_ns);
/* A tenant whose books did not move since the last sample (as observe
 * would have found them at t_ns): the demand sample observe takes at t_ns,
 * of nothing. For a glue that stopped observing a quiet tenant, at its wake. */
void fg_fleet_idle_until(struct fg_fleet_tenant *ft, const struct fg_fleet_params *p,
			 uint64_t t_ns);
/* After observe and shape at now_ns: whether observe, shape and due would
 * change nothing but the demand sampler from now on, for as long as the
 * books stay as they are: no call in flight or owed, idle declared and
 * its floor reached (neither ends with time), the bucket shaped for it and
 * full to its hold cap (no refill to account), nothing used, refused,
 * billed or refilled unreported. The glue may stop visiting such a tenant
 * until its books move; waking it, it calls fg_fleet_idle_until with the
 * clock of the last tick that would have visited it (the books had not
 * moved by then), then observes it as before. */
bool fg_fleet_quiet(const struct fg_fleet_tenant *ft, struct fg_bucket *b,
		    const struct fg_fleet_params *p, const struct fg_fleet_books *books,
		    uint64_t now_ns);
/* Set the bucket's rate, hold cap and depth for now (after observe). */
void fg_fleet_shape(struct fg_fleet_tenant *ft, struct fg_bucket *b,
		    const struct fg_fleet_params *p, double typical_cost, uint64_t now_ns);

/* Units to ask for: the period's expected spend plus buffer and what was
 * refused since the last call (at least the largest recent refusal), less
 * what is held and what the rate brings. */
double fg_fleet_want(const struct fg_fleet_tenant *ft, struct fg_bucket *b,
		     const struct fg_fleet_params *p, double typical_cost, uint64_t now_ns);
/* Whether a call should go now (after observe). */
bool fg_fleet_due(const struct fg_fleet_tenant *ft, struct fg_bucket *b,
		  const struct fg_fleet_params *p, double typical_cost, uint64_t now_ns);
/* The call to send: a new one, or the unanswered one again. Marks it in
 * flight. Returns ft->call. */
const struct fg_fleet_call *fg_fleet_prepare(struct fg_fleet_tenant *ft, struct fg_bucket *b,
					     const struct fg_fleet_params *p,
					     const struct fg_fleet_books *books, uint64_t now_ns);
/* The answer to ft->call: units into the bucket, the lease, the epoch. */
void fg_fleet_apply(struct fg_fleet_tenant *ft, struct fg_bucket *b,
		    const struct fg_fleet_params *p, const struct fg_fleet_books *books,
		    const struct fg_fleet_answer *a, uint64_t now_ns);
/* No answer (store unreachable, timed out, an error): keep the call. */
void fg_fleet_failed(struct fg_fleet_tenant *ft, uint64_t now_ns);

/* How long the store keeps a tenant nobody calls about: by then one bucket
 * of the contract would be full again, so a bucket recreated full hands out
 * nothing one bucket would not (seconds). */
double fg_fleet_ttl_s(const struct fg_fleet_params *p);

/* The most the fleet admits, in units, over a window of window_s seconds
 * that starts with the fleet bucket full, while every node reaches the
 * store: depth + rate x window (one bucket of the contract), plus, per
 * node, `excess` (the most its requests in flight settle above their
 * reservations: a prompt estimated short; 0 for token-id prompts) and its
 * sliver of FG_FLEET_MIN_SHARE x rate. */
double fg_fleet_bound_units(const struct fg_fleet_params *p, uint32_t nodes, double window_s,
			    double excess);
/* The same while the store is unreachable for the whole window, nodes at
 * their fallback (each at most max(floor, rate / live nodes) after 2T of
 * its last lease, and what it held when the store went): per second at most
 * max(rate, nodes x floor) + the slivers; held units are the bucket's. */
double fg_fleet_outage_bound_units(const struct fg_fleet_params *p, uint32_t nodes,
				   double window_s, double held, double excess);

#endif
