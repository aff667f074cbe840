/* test_fleet_grant.c — a node's side of the fleet bucket (policy/fleet_grant):
 * the rate by mode (lease, fallback after 2T, floor, unheard), the hold
 * cap, what is asked for, when a call is due, refill and demand as the
 * bucket's books show them, trickle and grants applied, debt, epoch
 * changes, retries resent unchanged, a quiet tenant left unvisited until
 * used, and the stated bounds. Table-driven
 * where the rule is a table. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "policy/fleet_grant.h"
#include "selftests/unit/assert_near.h"

#define S 1000000000ull
#define T0 (1000 * S)

static const struct fg_fleet_params P = {
	.rate = 1000, .depth = 2000, .floor = 0, .period_s = 2, .buffer_s = 1,
	.node_timeout_s = 30,
};

static uint64_t at(double s)
{
	return T0 + (uint64_t)(s * 1e9);
}

static struct fg_fleet_books books(double consumed, double refused)
{
	return (struct fg_fleet_books){ .consumed = consumed, .billed = consumed, .refused = refused };
}

static struct fg_fleet_answer answer(const char *epoch, double rate, double units, uint32_t live)
{
	struct fg_fleet_answer a;
	memset(&a, 0, sizeof(a));
	snprintf(a.epoch, sizeof(a.epoch), "%s", epoch);
	a.rate = rate;
	a.units = units;
	a.live_nodes = live;
	return a;
}

/* A tenant of `rate` whose node bucket (depth 2000) holds `level`, its
 * books empty, at T0. */
static void start(struct fg_fleet_tenant *ft, struct fg_bucket *b, struct fg_fleet_books *bk,
		  double rate, double level)
{
	fg_bucket_init(b, rate, 2000, T0);
	b->level = level;
	fg_fleet_tenant_init(ft, b, bk, T0);
}

/* The first call at T0, answered with `a`. */
static struct fg_fleet_answer lease(struct fg_fleet_tenant *ft, struct fg_bucket *b,
				    struct fg_fleet_books *bk, struct fg_fleet_answer a)
{
	fg_fleet_prepare(ft, b, &P, bk, T0);
	fg_fleet_apply(ft, b, &P, bk, &a, T0);
	return a;
}

static void rates_by_mode(void **state)
{
	(void)state;
	static const struct {
		const char *name;
		double age_s;          /* since the last answer; < 0 = never */
		bool idle;
		uint32_t live;
		double lease, floor;
		enum fg_fleet_mode mode;
		double rate;
	} rows[] = {
		{ "unheard: a sliver, never the contract", -1, false, 0, 0, 0, FG_FLEET_UNHEARD, 1 },
		{ "unheard: the floor", -1, false, 0, 0, 50, FG_FLEET_UNHEARD, 50 },
		{ "lease", 1, false, 3, 400, 0, FG_FLEET_LEASE, 400 },
		{ "lease to the end of 2T", 3.999, false, 3, 400, 0, FG_FLEET_LEASE, 400 },
		{ "lease of 0: the sliver", 1, false, 3, 0, 0, FG_FLEET_LEASE, 1 },
		{ "2T silent: contract / live nodes", 4, false, 3, 400, 0, FG_FLEET_FALLBACK, 1000.0 / 3 },
		{ "2T silent: the floor when above", 4, false, 3, 400, 500, FG_FLEET_FALLBACK, 500 },
		{ "2T silent, alone: the contract", 5, false, 1, 100, 0, FG_FLEET_FALLBACK, 1000 },
		{ "2T silent after saying idle: the floor", 4, true, 3, 400, 50, FG_FLEET_FLOOR, 50 },
		{ "idle, no floor: the sliver", 10, true, 3, 400, 0, FG_FLEET_FLOOR, 1 },
		{ "presumed gone by the fleet: the floor", 30, false, 3, 400, 20, FG_FLEET_FLOOR, 20 },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct fg_fleet_tenant ft;
		struct fg_fleet_params p = P;
		memset(&ft, 0, sizeof(ft));
		p.floor = rows[i].floor;
		ft.rate = rows[i].lease;
		ft.live_nodes = rows[i].live;
		ft.idle_declared = rows[i].idle;
		ft.last_ok_ns = rows[i].age_s < 0 ? 0 : T0;
		uint64_t now = rows[i].age_s < 0 ? T0 : at(rows[i].age_s);
		if (fg_fleet_mode_at(&ft, &p, now) != rows[i].mode ||
		    fabs(fg_fleet_rate(&ft, &p, now) - rows[i].rate) > 1e-9) {
			print_error("%s: mode %s rate %.6g, want %s %.6g\n", rows[i].name,
				    fg_fleet_mode_name(fg_fleet_mode_at(&ft, &p, now)),
				    fg_fleet_rate(&ft, &p, now), fg_fleet_mode_name(rows[i].mode),
				    rows[i].rate);
			fail();
		}
	}
}

static void hold_cap_table(void **state)
{
	(void)state;
	static const struct {
		const char *name;
		double rate, typical, refused;
		double cap;
	} rows[] = {
		{ "a period and the buffer of the rate", 300, 10, 0, 900 },
		{ "two typical requests at least", 10, 100, 0, 200 },
		{ "no request yet: 0.1 s of the contract", 10, 0, 0, 100 },
		{ "the largest refused request", 10, 10, 700, 700 },
		{ "never above the depth", 1000, 10, 0, 2000 },
		{ "a refusal above the depth: the depth", 10, 10, 5000, 2000 },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct fg_fleet_tenant ft;
		memset(&ft, 0, sizeof(ft));
		ft.refused_peak_prev = rows[i].refused;
		double cap = fg_fleet_hold_cap(&ft, &P, rows[i].rate, rows[i].typical);
		if (fabs(cap - rows[i].cap) > 1e-9) {
			print_error("%s: cap %.6g, want %.6g\n", rows[i].name, cap, rows[i].cap);
			fail();
		}
	}
}

/* Refill is what the level gained that requests and grants do not explain;
 * outside a lease it is also self-granted. Requests, settlement debt and
 * refunds are not refill. */
static void observe_counts_refill_not_requests(void **state)
{
	(void)state;
	struct fg_bucket b;
	struct fg_fleet_tenant ft;
	struct fg_fleet_books bk = books(0, 0);

	start(&ft, &b, &bk, 100, 0);
	ft.last_ok_ns = T0; /* in a lease of 100/s */
	ft.rate = 100;
	ft.live_nodes = 10;
	fg_fleet_shape(&ft, &b, &P, 0, T0);
	fg_fleet_observe(&ft, &b, &P, &bk, at(1));
	assert_near(ft.refill_unreported, 100);
	assert_near(ft.self_granted, 0);
	/* a request of 50 reserved, settled at 60 (debt of 10), one of 30 refunded */
	assert_true(fg_bucket_reserve(&b, 50, at(1)));
	fg_bucket_settle(&b, 50, 60, at(1));
	assert_true(fg_bucket_reserve(&b, 30, at(1)));
	fg_bucket_settle(&b, 30, 0, at(1));
	bk.consumed = 60;
	bk.billed = 60;
	fg_fleet_observe(&ft, &b, &P, &bk, at(1));
	assert_near(ft.refill_unreported, 100);
	assert_near(ft.usage_unreported, 60);
	/* to 2T after the answer, at the lease (40 -> 300, the hold cap:
	 * 100/s over T + buffer); then contract / 10 nodes, self-granted */
	fg_fleet_observe(&ft, &b, &P, &bk, at(4));
	assert_near(ft.refill_unreported, 100 + 260);
	fg_fleet_shape(&ft, &b, &P, 0, at(4));
	assert_int_equal(ft.shaped, FG_FLEET_FALLBACK);
	assert_true(fg_bucket_reserve(&b, 250, at(4)));
	bk.consumed += 250;
	fg_fleet_observe(&ft, &b, &P, &bk, at(5));
	assert_near(ft.refill_unreported, 100 + 260 + 100);
	assert_near(ft.self_granted, 100);
}

static void demand_is_used_plus_refused(void **state)
{
	(void)state;
	struct fg_bucket b;
	struct fg_fleet_tenant ft;
	struct fg_fleet_books bk = books(0, 0);

	start(&ft, &b, &bk, 1000, 2000);
	for (int i = 1; i <= 40; i++) {
		bk.consumed = 100.0 * i * 0.5;  /* 100 units/s used */
		bk.refused = 50.0 * i * 0.5;    /* 50 units/s refused */
		fg_fleet_observe(&ft, &b, &P, &bk, at(0.5 * i));
	}
	assert_true(fabs(ft.demand - 150) < 1);
	/* it decays when the load stops */
	for (int i = 41; i <= 70; i++)
		fg_fleet_observe(&ft, &b, &P, &bk, at(0.5 * i));
	assert_true(ft.demand < 1);
}

static void want_table(void **state)
{
	(void)state;
	static const struct {
		const char *name;
		double demand, level, rate, typical, refused;
		double want;
	} rows[] = {
		{ "the period's spend + buffer, less held and the rate's", 600, 100, 200, 10, 0,
		  600 * 3 - 100 - 200 * 2 },
		{ "the rate covers it: nothing", 100, 0, 200, 10, 0, 0 },
		{ "idle: two typical requests", 0, 0, 1, 50, 0, 98 },
		{ "plus the largest refused request", 0, 0, 1, 50, 400, 498 },
		{ "never more than the depth", 5000, 0, 1, 10, 0, 2000 },
		{ "a debt is asked for too", 600, -300, 200, 10, 0, 600 * 3 + 300 - 200 * 2 },
		{ "what was refused since the last call (the backlog)", 0, 0, 1, 50, -900, 998 },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct fg_fleet_tenant ft;
		struct fg_bucket b;
		memset(&ft, 0, sizeof(ft));
		fg_bucket_init(&b, rows[i].rate, P.depth, T0);
		b.level = rows[i].level;
		ft.demand = rows[i].demand;
		/* a negative figure in the table is a backlog, a positive one the
		 * largest refusal */
		if (rows[i].refused < 0)
			ft.backlog = -rows[i].refused;
		else
			ft.refused_peak = rows[i].refused;
		double w = fg_fleet_want(&ft, &b, &P, rows[i].typical, T0);
		if (fabs(w - rows[i].want) > 1e-6) {
			print_error("%s: want %.6g, expected %.6g\n", rows[i].name, w, rows[i].want);
			fail();
		}
	}
}

static void due_rules(void **state)
{
	(void)state;
	static const struct {
		const char *name;
		bool called, in_flight, retry, idle_declared;
		double since_s, used, refused, refill, level, fleet_avail;
		bool due;
	} rows[] = {
		{ "never called", false, false, false, false, 0, 0, 0, 0, 1000, 0, true },
		{ "one call at a time", true, true, false, false, 9, 10, 0, 0, 1000, 0, false },
		{ "a failed call: again after a quarter period", true, false, true, false, 0.4, 0, 0, 0, 1000, 0, false },
		{ "a failed call: again", true, false, true, false, 0.5, 0, 0, 0, 1000, 0, true },
		{ "active: every period", true, false, false, false, 2, 10, 0, 0, 1000, 0, true },
		{ "active, plenty held: not before the period", true, false, false, false, 1, 10, 0, 0, 1000, 0, false },
		{ "active, low: early", true, false, false, false, 0.3, 10, 0, 0, 10, 0, true },
		{ "low, but not twice in an eighth of T", true, false, false, false, 0.2, 10, 0, 0, 10, 0, false },
		{ "refused, the fleet has units: at once (T/50)", true, false, false, false, 0.04, 0, 40, 0, 1000, 500, true },
		{ "refused, not quite T/50 yet", true, false, false, false, 0.03, 0, 40, 0, 1000, 500, false },
		{ "refused, the fleet drained: nothing sooner than T", true, false, false, false, 0.3, 0, 40, 0, 1000, 0, false },
		{ "refused, drained, period over", true, false, false, false, 2, 0, 40, 0, 1000, 0, true },
		{ "unreported refill: every period", true, false, false, false, 2, 0, 0, 5, 1000, 0, true },
		{ "idle: say so once", true, false, false, false, 2, 0, 0, 0, 1000, 0, true },
		{ "idle, said so: nothing to report", true, false, false, true, 60, 0, 0, 0, 1000, 0, false },
		{ "idle, said so, used again", true, false, false, true, 0.3, 10, 0, 0, 10, 0, true },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct fg_fleet_tenant ft;
		struct fg_bucket b;
		memset(&ft, 0, sizeof(ft));
		fg_bucket_init(&b, 100, P.depth, T0);
		b.level = rows[i].level;
		b.cap = 1000;
		ft.last_call_ns = rows[i].called ? T0 : 0;
		ft.in_flight = rows[i].in_flight;
		ft.retry = rows[i].retry;
		ft.idle_declared = rows[i].idle_declared;
		ft.consumed_mark = rows[i].used;
		ft.refused_mark = rows[i].refused;
		ft.refill_unreported = rows[i].refill;
		ft.last.fleet_avail = rows[i].fleet_avail;
		bool due = fg_fleet_due(&ft, &b, &P, 10, at(rows[i].since_s));
		if (due != rows[i].due) {
			print_error("%s: due %d, want %d\n", rows[i].name, due, rows[i].due);
			fail();
		}
	}
}

/* A call that got no answer goes again as it was: same seq, same figures,
 * whatever happened since; what happened since goes in the next one. */
static void retry_resends_the_same_call(void **state)
{
	(void)state;
	struct fg_bucket b;
	struct fg_fleet_tenant ft;
	struct fg_fleet_books bk = books(0, 0);

	start(&ft, &b, &bk, 100, 0);
	struct fg_fleet_answer a = lease(&ft, &b, &bk, answer("e1", 100, 0, 1));
	fg_fleet_observe(&ft, &b, &P, &bk, at(1));
	struct fg_fleet_call first = *fg_fleet_prepare(&ft, &b, &P, &bk, at(1));
	assert_int_equal(first.seq, 2);
	assert_near(first.refill, 100);
	fg_fleet_failed(&ft, at(1.5));
	assert_true(ft.retry);
	fg_fleet_observe(&ft, &b, &P, &bk, at(2)); /* 100 more refill meanwhile */
	const struct fg_fleet_call *again = fg_fleet_prepare(&ft, &b, &P, &bk, at(2));
	assert_int_equal(again->seq, 2);
	assert_near(again->refill, first.refill);
	assert_near(again->want, first.want);
	assert_memory_equal(again, &first, sizeof(first));
	fg_fleet_apply(&ft, &b, &P, &bk, &a, at(2.1));
	assert_int_equal(ft.seq, 2);
	assert_false(ft.retry || ft.in_flight);
	/* the store charged 100; the other 100 (+ 10 since) go in seq 3 */
	const struct fg_fleet_call *next = fg_fleet_prepare(&ft, &b, &P, &bk, at(2.1));
	assert_int_equal(next->seq, 3);
	assert_near(next->refill, 110);
	assert_string_equal(next->epoch, "e1");
}

static void grants_trickle_and_epoch(void **state)
{
	(void)state;
	struct fg_bucket b;
	struct fg_fleet_tenant ft;
	struct fg_fleet_books bk = books(0, 0);

	start(&ft, &b, &bk, 1000, 0);
	fg_fleet_shape(&ft, &b, &P, 0, T0);
	assert_near(b.rate, 1);          /* unheard: the sliver */
	struct fg_fleet_answer a = lease(&ft, &b, &bk, answer("e1", 300, 500, 3));
	assert_near(fg_bucket_level(&b, T0), 500);   /* units at once */
	assert_near(ft.units_granted, 500);
	assert_near(b.rate, 300);                    /* the trickle */
	assert_near(b.cap, 300 * 3);
	assert_int_equal(ft.epoch_changes, 0);       /* the first epoch is not a change */
	/* the trickle refills to the cap, no further */
	assert_near(fg_bucket_level(&b, at(1)), 800);
	assert_near(fg_bucket_level(&b, at(10)), 900);
	/* a grant that would pass the depth stops there */
	fg_fleet_prepare(&ft, &b, &P, &bk, at(10));
	a = answer("e2", 300, 1500, 3);
	fg_fleet_apply(&ft, &b, &P, &bk, &a, at(10));
	assert_near(fg_bucket_level(&b, at(10)), 2000);
	assert_near(ft.units_granted, 500 + 1100);
	assert_int_equal(ft.epoch_changes, 1);       /* the store came back new */
	assert_string_equal(ft.epoch, "e2");
	/* a debt: settled above its reservation, the next want asks for it */
	assert_true(fg_bucket_reserve(&b, 2000, at(10)));
	fg_bucket_settle(&b, 2000, 2300, at(10));
	bk.consumed = bk.billed = 2300;
	fg_fleet_observe(&ft, &b, &P, &bk, at(10));
	assert_near(fg_bucket_level(&b, at(10)), -300);
	/* the trickle's 400 to the cap went with the old epoch; the debt is not refill */
	assert_near(ft.refill_unreported, 0);
	ft.demand = 300;
	/* 300/s over T + buffer, plus the debt, less the trickle's period */
	assert_near(fg_fleet_want(&ft, &b, &P, 10, at(10)), 900 + 300 - 600);
}

/* The store forgets a tenant nobody asked about for ttl_s; a node that
 * last heard of it longer ago than that does not claim a lost bucket. */
static void epoch_sent_only_within_ttl(void **state)
{
	(void)state;
	struct fg_bucket b;
	struct fg_fleet_tenant ft;
	struct fg_fleet_books bk = books(0, 0);
	double ttl = fg_fleet_ttl_s(&P);

	assert_near(ttl, 2 * 2 + 30); /* twice the refill time of the depth + node_timeout_s */
	start(&ft, &b, &bk, 1000, 2000);
	struct fg_fleet_answer a = lease(&ft, &b, &bk, answer("e1", 300, 0, 1));
	assert_string_equal(fg_fleet_prepare(&ft, &b, &P, &bk, at(ttl - 1))->epoch, "e1");
	fg_fleet_apply(&ft, &b, &P, &bk, &a, at(ttl - 1));
	assert_string_equal(fg_fleet_prepare(&ft, &b, &P, &bk, at(2 * ttl))->epoch, "");
}

/* The store lost the bucket while this node was cut off: what it refilled
 * meanwhile is not charged to the new bucket (the new one starts empty;
 * charging the outage to it would bill it twice). With the same epoch (a
 * store that kept its state) it is charged. */
static void outage_refill_goes_with_its_epoch(void **state)
{
	(void)state;
	struct fg_bucket b;
	struct fg_fleet_tenant ft;
	struct fg_fleet_books bk = books(0, 0);

	for (int lost = 0; lost <= 1; lost++) {
		start(&ft, &b, &bk, 100, 0);
		struct fg_fleet_answer a = lease(&ft, &b, &bk, answer("e1", 100, 0, 1));
		fg_fleet_observe(&ft, &b, &P, &bk, at(1));
		fg_fleet_prepare(&ft, &b, &P, &bk, at(1));
		fg_fleet_failed(&ft, at(1.5)); /* the store went away */
		fg_fleet_observe(&ft, &b, &P, &bk, at(20));
		fg_fleet_shape(&ft, &b, &P, 0, at(20));
		double outage = ft.refill_unreported;
		assert_true(outage > 100);
		fg_fleet_prepare(&ft, &b, &P, &bk, at(20)); /* the retry */
		a = answer(lost ? "e2" : "e1", 100, 0, 1);
		fg_fleet_apply(&ft, &b, &P, &bk, &a, at(20));
		if (lost)
			assert_near(ft.refill_unreported, 0);
		else
			assert_true(ft.refill_unreported > 0 && ft.refill_unreported < outage);
		assert_int_equal(ft.epoch_changes, (uint64_t)lost);
	}
}

static void idle_said_once(void **state)
{
	(void)state;
	struct fg_bucket b;
	struct fg_fleet_tenant ft;
	struct fg_fleet_books bk = books(0, 0);

	start(&ft, &b, &bk, 1000, 2000);
	const struct fg_fleet_call *c = fg_fleet_prepare(&ft, &b, &P, &bk, T0);
	assert_true(c->idle);
	struct fg_fleet_answer a = answer("e1", 1, 0, 2);
	fg_fleet_apply(&ft, &b, &P, &bk, &a, T0);
	fg_fleet_observe(&ft, &b, &P, &bk, at(60));
	assert_false(fg_fleet_due(&ft, &b, &P, 10, at(60)));
	assert_int_equal(fg_fleet_mode_at(&ft, &P, at(60)), FG_FLEET_FLOOR);
	/* used again: due, and not idle */
	assert_true(fg_bucket_reserve(&b, 100, at(60)));
	bk.consumed = 100;
	fg_fleet_observe(&ft, &b, &P, &bk, at(60));
	assert_true(fg_fleet_due(&ft, &b, &P, 10, at(60)));
	assert_false(fg_fleet_prepare(&ft, &b, &P, &bk, at(60))->idle);
}

/* A node's tenant as the glue ticks it: observe, shape, and a call when
 * due, answered at once (a lease of 500/s, no units). */
struct ticked {
	struct fg_bucket b;
	struct fg_fleet_tenant ft;
	struct fg_fleet_books bk;
};

static bool glue_tick(struct ticked *n, uint64_t t)
{
	fg_fleet_observe(&n->ft, &n->b, &P, &n->bk, t);
	fg_fleet_shape(&n->ft, &n->b, &P, n->bk.typical_cost, t);
	if (!fg_fleet_due(&n->ft, &n->b, &P, n->bk.typical_cost, t))
		return false;
	fg_fleet_prepare(&n->ft, &n->b, &P, &n->bk, t);
	struct fg_fleet_answer a = answer("e1", 500, 0, 2);
	fg_fleet_apply(&n->ft, &n->b, &P, &n->bk, &a, t);
	return true;
}

static void use(struct ticked *n, double units, uint64_t t)
{
	assert_true(fg_bucket_reserve(&n->b, units, t));
	n->bk.consumed += units;
	n->bk.billed += units;
}

/* fg_fleet_quiet: a tenant the glue stops visiting (B) against the same
 * tenant visited every tick (A). While B sleeps, A's ticks change nothing
 * but its demand sampler and no call is due; woken by a use, with
 * fg_fleet_idle_until at the last tick, B calls as A does and its demand
 * and bucket follow A's. */
static void quiet_sleeps_until_used(void **state)
{
	(void)state;
	const uint64_t tick = 20000000ull; /* the glue's 20 ms */
	struct ticked a, b;

	a.bk = books(0, 0);
	start(&a.ft, &a.b, &a.bk, 1000, 2000);
	use(&a, 300, T0);
	b = a;
	uint64_t t = T0, slept = 0;
	int k;
	for (k = 1; k < 3000 && !slept; k++) {
		t = T0 + k * tick;
		assert_int_equal(glue_tick(&a, t), glue_tick(&b, t));
		if (fg_fleet_quiet(&b.ft, &b.b, &P, &b.bk, t))
			slept = t;
	}
	assert_true(slept);
	assert_true(b.ft.idle_declared);
	assert_true(b.ft.demand > 0); /* the use still shows, decaying */
	/* a quiet tenant is not quiet with a call in flight, owed, or used */
	struct ticked c = b;
	c.ft.in_flight = true;
	assert_false(fg_fleet_quiet(&c.ft, &c.b, &P, &c.bk, t));
	c = b;
	c.ft.retry = true;
	assert_false(fg_fleet_quiet(&c.ft, &c.b, &P, &c.bk, t));
	c = b;
	use(&c, 1, t);
	assert_false(fg_fleet_quiet(&c.ft, &c.b, &P, &c.bk, t));
	c = b;
	c.bk.refused += 5;
	assert_false(fg_fleet_quiet(&c.ft, &c.b, &P, &c.bk, t));

	/* asleep: A's ticks leave all but the sampler as B has it; A samples
	 * twenty times meanwhile (10 s) */
	uint64_t samples = 0, last = t, sampled = a.ft.sample_ns;
	for (; samples < 20 || a.ft.sample_ns != last; k++) {
		t = T0 + k * tick;
		assert_false(glue_tick(&a, t));
		assert_true(fg_fleet_quiet(&a.ft, &a.b, &P, &a.bk, t));
		assert_near(fg_bucket_level(&a.b, t), fg_bucket_level(&b.b, t));
		assert_near(a.b.cap, b.b.cap);
		assert_near(a.b.rate, b.b.rate);
		assert_near(a.ft.level_mark, b.ft.level_mark);
		assert_near(a.ft.refill_unreported, b.ft.refill_unreported);
		assert_near(a.ft.self_granted, b.ft.self_granted);
		assert_int_equal(a.ft.shaped, b.ft.shaped);
		assert_int_equal(a.ft.last_call_ns, b.ft.last_call_ns);
		if (a.ft.sample_ns != sampled) {
			sampled = a.ft.sample_ns;
			samples++;
		}
		last = t;
	}
	/* woken right after a tick that sampled: the same samples as A */
	fg_fleet_idle_until(&b.ft, &P, last);
	assert_int_equal(b.ft.sample_ns, a.ft.sample_ns);
	assert_true(fabs(b.ft.demand - a.ft.demand) <= 1e-9 * a.ft.demand);
	t = last + tick / 2;
	use(&a, 100, t);
	use(&b, 100, t);
	int calls = 0;
	for (int j = 1; j <= 500; j++) {
		t = last + j * tick;
		bool ca = glue_tick(&a, t), cb = glue_tick(&b, t);
		assert_int_equal(ca, cb);
		calls += ca;
		assert_true(fabs(b.ft.demand - a.ft.demand) <= 1e-9 * a.ft.demand);
		assert_near(fg_bucket_level(&a.b, t), fg_bucket_level(&b.b, t));
		assert_near(a.ft.call.want, b.ft.call.want);
	}
	assert_true(calls > 0);
}

static void bounds(void **state)
{
	(void)state;
	/* one bucket of the contract over the window, plus per node its
	 * settlement excess and its sliver */
	assert_near(fg_fleet_bound_units(&P, 3, 30, 0), 2000 + 1000 * 30 + 3 * (1 * 30));
	assert_near(fg_fleet_bound_units(&P, 3, 30, 150), 2000 + 30000 + 3 * (150 + 30));
	/* store down: the contract per second (floors below contract / N),
	 * what the nodes held, slivers */
	assert_near(fg_fleet_outage_bound_units(&P, 3, 10, 500, 0), 500 + (1000 + 3) * 10);
	struct fg_fleet_params p = P;
	p.floor = 400; /* floors above contract / N: N x floor */
	assert_near(fg_fleet_outage_bound_units(&p, 3, 10, 0, 0), (1200 + 3) * 10);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(rates_by_mode),
		cmocka_unit_test(hold_cap_table),
		cmocka_unit_test(observe_counts_refill_not_requests),
		cmocka_unit_test(demand_is_used_plus_refused),
		cmocka_unit_test(want_table),
		cmocka_unit_test(due_rules),
		cmocka_unit_test(retry_resends_the_same_call),
		cmocka_unit_test(grants_trickle_and_epoch),
		cmocka_unit_test(epoch_sent_only_within_ttl),
		cmocka_unit_test(outage_refill_goes_with_its_epoch),
		cmocka_unit_test(idle_said_once),
		cmocka_unit_test(quiet_sleeps_until_used),
		cmocka_unit_test(bounds),
	};
	return cmocka_run_group_tests_name("fleet_grant", tests, NULL, NULL);
}
