/* test_admission.c — admit / 429 with a truthful retry time / never fits,
 * refusals that cost nothing, and the deny-window rule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "policy/admission.h"

#define S 1000000000ull
#define MS 1000000ull
#define T0 (5000 * S)

static void admits_and_reserves(void **state)
{
	(void)state;
	struct fg_bucket b;

	fg_bucket_init(&b, 100, 6000, T0);
	struct fg_decision d = fg_admission_decide(&b, 2500, T0);
	assert_int_equal(d.verdict, FG_ADMIT);
	assert_true(fg_bucket_level(&b, T0) == 3500);
}

static void retry_later_with_the_refill_time(void **state)
{
	(void)state;
	struct fg_bucket b;

	fg_bucket_init(&b, 100, 6000, T0);
	assert_int_equal(fg_admission_decide(&b, 6000, T0).verdict, FG_ADMIT);
	struct fg_decision d = fg_admission_decide(&b, 1234, T0);
	assert_int_equal(d.verdict, FG_RETRY_LATER);
	assert_int_equal(d.wait_ns, 12340 * MS);
	assert_int_equal(fg_retry_after_s(d.wait_ns), 13); /* rounded up */
	assert_int_equal(fg_retry_after_ms(d.wait_ns), 12340);
	/* refused requests cost nothing */
	assert_true(fg_bucket_level(&b, T0) == 0);
	/* told the truth: one millisecond early is still too early, on time fits */
	assert_int_equal(fg_admission_decide(&b, 1234, T0 + d.wait_ns - MS).verdict,
			 FG_RETRY_LATER);
	assert_int_equal(fg_admission_decide(&b, 1234, T0 + d.wait_ns).verdict, FG_ADMIT);
}

/* 300 clients refused at once are told 300 turns, one request's refill
 * apart; each one that comes back on its turn is admitted. */
static void retry_turns_queue_clients_behind_each_other(void **state)
{
	(void)state;
	struct fg_bucket b;
	uint64_t turn = 0, wait[300];

	fg_bucket_init(&b, 100, 6000, T0);
	assert_int_equal(fg_admission_decide(&b, 6000, T0).verdict, FG_ADMIT);
	for (int k = 0; k < 300; k++) {
		assert_int_equal(fg_admission_decide(&b, 500, T0).verdict, FG_RETRY_LATER);
		wait[k] = fg_retry_turn_ns(&b, 500, T0, &turn, 0);
		assert_int_equal(wait[k], (uint64_t)(k + 1) * 5 * S);
	}
	assert_int_equal(turn, T0 + 1500 * S);
	for (int k = 0; k < 300; k++)
		assert_int_equal(fg_admission_decide(&b, 500, T0 + wait[k]).verdict, FG_ADMIT);
	/* once the last turn has passed, the next one waits for the bucket alone */
	uint64_t now = T0 + 1501 * S;
	assert_int_equal(fg_retry_turn_ns(&b, 500, now, &turn, 0), 4 * S);
	/* jitter: up to a tenth of one request's refill (or of the wait) */
	uint64_t t2 = 0;
	assert_int_equal(fg_admission_decide(&b, 6000, now + 100 * S).verdict, FG_ADMIT);
	uint64_t w = fg_retry_turn_ns(&b, 500, now + 100 * S, &t2, 0.999);
	assert_true(w > 5 * S && w < 5 * S + S / 2);
	w = fg_retry_turn_ns(&b, 500, now + 100 * S, &t2, 0.999);
	assert_true(w > 10 * S && w < 10 * S + S / 2); /* + up to 0.1 x min(5 s, 10 s) */
	/* a nonsense draw adds nothing */
	uint64_t t3 = 0;
	assert_int_equal(fg_retry_turn_ns(&b, 500, now + 100 * S, &t3, -1), 5 * S);
	/* a queue timeout: as long as it waited, plus up to a tenth */
	assert_int_equal(fg_retry_spread_ns(30 * S, 0), 30 * S);
	assert_true(fg_retry_spread_ns(30 * S, 0.999) < 33 * S);
	assert_true(fg_retry_spread_ns(30 * S, 0.5) == 31500 * MS);
}

static void retry_after_rounding(void **state)
{
	(void)state;
	assert_int_equal(fg_retry_after_s(1), 1);
	assert_int_equal(fg_retry_after_s(S), 1);
	assert_int_equal(fg_retry_after_s(S + 1), 2);
	assert_int_equal(fg_retry_after_ms(1), 1);
	assert_int_equal(fg_retry_after_ms(1500 * MS), 1500);
	assert_int_equal(fg_retry_after_ms(1500 * MS + 1), 1501);
}

static void never_fits_is_final_and_free(void **state)
{
	(void)state;
	struct fg_bucket b;

	fg_bucket_init(&b, 100, 6000, T0);
	struct fg_decision d = fg_admission_decide(&b, 6001, T0);
	assert_int_equal(d.verdict, FG_NEVER_FITS);
	assert_true(fg_bucket_level(&b, T0) == 6000);
	/* even when the bucket is empty, an oversize request is never-fits, not 429 */
	assert_int_equal(fg_admission_decide(&b, 6000, T0).verdict, FG_ADMIT);
	assert_int_equal(fg_admission_decide(&b, 7000, T0).verdict, FG_NEVER_FITS);
	/* a tenant with no rate can never be served */
	fg_bucket_init(&b, 0, 0, T0);
	assert_int_equal(fg_admission_decide(&b, 1, T0).verdict, FG_NEVER_FITS);
}

static void typical_cost_is_a_moving_average(void **state)
{
	(void)state;
	double t = fg_typical_cost_update(0, 800);
	assert_true(t == 800);
	t = fg_typical_cost_update(t, 1600);
	assert_true(t == 800 + 0.125 * 800);
	assert_true(fg_typical_cost_update(t, 0) == t);
}

static void deny_window_opens_while_typical_cannot_fit(void **state)
{
	(void)state;
	struct fg_bucket b;

	fg_bucket_init(&b, 100, 6000, T0);
	assert_int_equal(fg_deny_until_ns(&b, 500, T0, 0), 0); /* full: no window */
	assert_int_equal(fg_admission_decide(&b, 6000, T0).verdict, FG_ADMIT);
	/* empty: typical 500 needs 5 s of refill */
	assert_int_equal(fg_deny_until_ns(&b, 500, T0, 0), T0 + 5 * S);
	/* partly refilled: the window shrinks with the refill */
	assert_int_equal(fg_deny_until_ns(&b, 500, T0 + 2 * S, 1), T0 + 5 * S);
	/* 100 ms left: too short to open a window, but an open one is kept
	 * to the refill time, not closed early into 429s */
	assert_int_equal(fg_deny_until_ns(&b, 500, T0 + 4900 * MS, 0), 0);
	assert_int_equal(fg_deny_until_ns(&b, 500, T0 + 4900 * MS, 1), T0 + 5 * S);
	/* refilled enough: closed */
	assert_int_equal(fg_deny_until_ns(&b, 500, T0 + 5 * S, 1), 0);
}

static void deny_window_skips_short_waits_and_unknowns(void **state)
{
	(void)state;
	struct fg_bucket b;

	fg_bucket_init(&b, 1000, 6000, T0);
	assert_int_equal(fg_admission_decide(&b, 6000, T0).verdict, FG_ADMIT);
	/* 100 units at 1000/s is 100 ms: below FG_DENY_MIN_NS, not worth a SYN delay */
	assert_int_equal(fg_deny_until_ns(&b, 100, T0, 0), 0);
	assert_int_equal(fg_deny_until_ns(&b, 300, T0, 0), T0 + 300 * MS);
	/* no typical cost yet, or a typical request that never fits: no window */
	assert_int_equal(fg_deny_until_ns(&b, 0, T0, 0), 0);
	assert_int_equal(fg_deny_until_ns(&b, 7000, T0, 1), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(admits_and_reserves),
		cmocka_unit_test(retry_later_with_the_refill_time),
		cmocka_unit_test(retry_turns_queue_clients_behind_each_other),
		cmocka_unit_test(retry_after_rounding),
		cmocka_unit_test(never_fits_is_final_and_free),
		cmocka_unit_test(typical_cost_is_a_moving_average),
		cmocka_unit_test(deny_window_opens_while_typical_cannot_fit),
		cmocka_unit_test(deny_window_skips_short_waits_and_unknowns),
	};
	return cmocka_run_group_tests_name("admission", tests, NULL, NULL);
}
