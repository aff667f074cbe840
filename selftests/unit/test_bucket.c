/* test_bucket.c — the token bucket in units: reserve, refill, settle
 * (refund and charge), reshape on reload, refill times. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "policy/token_bucket.h"

#define S 1000000000ull /* one second in ns */
#define T0 (1000 * S)   /* an arbitrary monotonic start */

#include "selftests/unit/assert_near.h"

static void starts_full_and_reserves(void **state)
{
	(void)state;
	struct fg_bucket b;

	fg_bucket_init(&b, 100, 1000, T0);
	assert_near(fg_bucket_level(&b, T0), 1000);
	assert_true(fg_bucket_reserve(&b, 400, T0));
	assert_near(fg_bucket_level(&b, T0), 600);
	assert_false(fg_bucket_reserve(&b, 601, T0));
	assert_near(fg_bucket_level(&b, T0), 600); /* a refusal takes nothing */
	assert_true(fg_bucket_reserve(&b, 600, T0));
	assert_near(fg_bucket_level(&b, T0), 0);
}

static void concurrent_reservations_cannot_overshoot(void **state)
{
	(void)state;
	struct fg_bucket b;
	int admitted = 0;

	fg_bucket_init(&b, 100, 1000, T0);
	for (int i = 0; i < 10; i++)
		admitted += fg_bucket_reserve(&b, 150, T0);
	assert_int_equal(admitted, 6); /* 6 x 150 = 900 <= 1000 < 7 x 150 */
	assert_near(fg_bucket_level(&b, T0), 100);
}

static void refills_at_rate_up_to_depth(void **state)
{
	(void)state;
	struct fg_bucket b;

	fg_bucket_init(&b, 100, 1000, T0);
	assert_true(fg_bucket_reserve(&b, 1000, T0));
	assert_near(fg_bucket_level(&b, T0 + S / 2), 50);
	assert_near(fg_bucket_level(&b, T0 + 3 * S), 300);
	assert_near(fg_bucket_level(&b, T0 + 60 * S), 1000); /* clamped at depth */
}

static void clock_going_backwards_adds_nothing(void **state)
{
	(void)state;
	struct fg_bucket b;

	fg_bucket_init(&b, 100, 1000, T0);
	assert_true(fg_bucket_reserve(&b, 1000, T0 + S));
	assert_near(fg_bucket_level(&b, T0), 0);
	assert_near(fg_bucket_level(&b, T0 + 2 * S), 100);
}

static void wait_is_the_refill_time_for_the_cost(void **state)
{
	(void)state;
	struct fg_bucket b;

	fg_bucket_init(&b, 100, 1000, T0);
	assert_int_equal(fg_bucket_wait_ns(&b, 1000, T0), 0);
	assert_true(fg_bucket_reserve(&b, 1000, T0));
	assert_int_equal(fg_bucket_wait_ns(&b, 250, T0), 2500000000ull);
	assert_int_equal(fg_bucket_wait_ns(&b, 250, T0 + S), 1500000000ull);
	/* at exactly that time the reservation goes through */
	assert_false(fg_bucket_reserve(&b, 250, T0 + 2500000000ull - 1000000));
	assert_true(fg_bucket_reserve(&b, 250, T0 + 2500000000ull));
}

static void never_fit_and_no_refill(void **state)
{
	(void)state;
	struct fg_bucket b;

	fg_bucket_init(&b, 100, 1000, T0);
	assert_false(fg_bucket_can_ever_fit(&b, 1000.5));
	assert_true(fg_bucket_can_ever_fit(&b, 1000));
	assert_int_equal(fg_bucket_wait_ns(&b, 1001, T0), FG_BUCKET_NEVER);
	assert_false(fg_bucket_can_ever_fit(&b, NAN));
	assert_false(fg_bucket_reserve(&b, NAN, T0));
	assert_false(fg_bucket_reserve(&b, -5, T0));

	fg_bucket_init(&b, 0, 0, T0); /* a suspended tenant */
	assert_int_equal(fg_bucket_wait_ns(&b, 1, T0), FG_BUCKET_NEVER);
	fg_bucket_init(&b, -3, NAN, T0); /* garbage contracts read as zero */
	assert_near(b.rate, 0);
	assert_near(b.depth, 0);
}

static void settle_refunds_the_unused_part(void **state)
{
	(void)state;
	struct fg_bucket b;

	fg_bucket_init(&b, 100, 1000, T0);
	assert_true(fg_bucket_reserve(&b, 800, T0));
	fg_bucket_settle(&b, 800, 300, T0); /* engine produced less than reserved */
	assert_near(fg_bucket_level(&b, T0), 700);
	assert_true(fg_bucket_reserve(&b, 500, T0));
	fg_bucket_settle(&b, 500, 0, T0); /* engine failed: full refund */
	assert_near(fg_bucket_level(&b, T0), 700);
}

static void settle_charges_the_overshoot_as_debt(void **state)
{
	(void)state;
	struct fg_bucket b;

	fg_bucket_init(&b, 100, 1000, T0);
	assert_true(fg_bucket_reserve(&b, 900, T0));
	fg_bucket_settle(&b, 900, 1300, T0); /* prompt was longer than estimated */
	assert_near(fg_bucket_level(&b, T0), -300);
	/* the debt is repaid before anything fits: 300 + 100 = 4 s */
	assert_int_equal(fg_bucket_wait_ns(&b, 100, T0), 4 * S);
}

static void settle_never_overfills(void **state)
{
	(void)state;
	struct fg_bucket b;

	fg_bucket_init(&b, 100, 1000, T0);
	assert_true(fg_bucket_reserve(&b, 500, T0));
	fg_bucket_settle(&b, 500, 0, T0 + 10 * S); /* refilled meanwhile */
	assert_near(fg_bucket_level(&b, T0 + 10 * S), 1000);
}

static void reshape_keeps_level_and_clamps(void **state)
{
	(void)state;
	struct fg_bucket b;

	fg_bucket_init(&b, 100, 1000, T0);
	assert_true(fg_bucket_reserve(&b, 400, T0));
	fg_bucket_reshape(&b, 50, 3000, T0 + S); /* refilled to 700 first */
	assert_near(fg_bucket_level(&b, T0 + S), 700);
	assert_near(fg_bucket_level(&b, T0 + 3 * S), 800); /* new rate */
	fg_bucket_reshape(&b, 50, 500, T0 + 3 * S);
	assert_near(fg_bucket_level(&b, T0 + 3 * S), 500);
}

/* agent.fleet: refill stops at the cap, what comes in by settle (a grant)
 * still counts to the depth, and "can ever fit" stays the depth's */
static void refill_stops_at_the_cap(void **state)
{
	(void)state;
	struct fg_bucket b;

	fg_bucket_init(&b, 100, 1000, T0);
	assert_true(fg_bucket_reserve(&b, 1000, T0));
	b.cap = 250;
	assert_near(fg_bucket_level(&b, T0 + S), 100);
	assert_near(fg_bucket_level(&b, T0 + 10 * S), 250);
	fg_bucket_settle(&b, 500, 0, T0 + 10 * S); /* a grant of 500 units */
	assert_near(fg_bucket_level(&b, T0 + 10 * S), 750);
	assert_near(fg_bucket_level(&b, T0 + 20 * S), 750); /* above the cap: refill adds nothing */
	assert_true(fg_bucket_can_ever_fit(&b, 1000));
	assert_true(fg_bucket_reserve(&b, 700, T0 + 20 * S));
	assert_near(fg_bucket_level(&b, T0 + 21 * S), 150);
	assert_near(fg_bucket_level(&b, T0 + 30 * S), 250);
	b.cap = 2000; /* a cap above the depth is the depth */
	assert_near(fg_bucket_level(&b, T0 + 60 * S), 1000);
	fg_bucket_init(&b, 100, 1000, T0);
	assert_near(b.cap, 0); /* a new bucket has none */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(starts_full_and_reserves),
		cmocka_unit_test(concurrent_reservations_cannot_overshoot),
		cmocka_unit_test(refills_at_rate_up_to_depth),
		cmocka_unit_test(clock_going_backwards_adds_nothing),
		cmocka_unit_test(wait_is_the_refill_time_for_the_cost),
		cmocka_unit_test(never_fit_and_no_refill),
		cmocka_unit_test(settle_refunds_the_unused_part),
		cmocka_unit_test(settle_charges_the_overshoot_as_debt),
		cmocka_unit_test(settle_never_overfills),
		cmocka_unit_test(reshape_keeps_level_and_clamps),
		cmocka_unit_test(refill_stops_at_the_cap),
	};
	return cmocka_run_group_tests_name("bucket", tests, NULL, NULL);
}
