/* test_pricing.c — prompt estimates, bounded chars-per-token calibration,
 * output reservations and settlement prices (all through the cost model). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "policy/cost_model.h"
#include "policy/policy.h"
#include "policy/pricing.h"

#include "selftests/unit/assert_near.h"

static struct fg_cost_model seed_model(void)
{
	struct fg_policy *p = test_malloc(sizeof(*p));
	struct fg_cost_model cm;

	fg_policy_defaults(p);
	fg_cost_model_init(&cm, &p->replica);
	test_free(p);
	return cm;
}

static void estimate_starts_at_four_chars_per_token(void **state)
{
	(void)state;
	struct fg_cost_model cm = seed_model();
	struct fg_calibration cal;
	struct fg_request_shape s = { .prompt_chars = 8000, .n = 1, .max_tokens = 500 };

	fg_calibration_init(&cal);
	assert_near(fg_chars_per_token(&cal, "llama"), 4.0);
	struct fg_price p = fg_price_request(&cm, FG_METER_REPLICA_TIME, &cal, "llama", &s, 256);
	/* the seed's request, 2,000 in and 500 out, priced by context: 499
	 * decode steps from 2,001 to 2,499 tokens at t(2,250) = 3.5963 units */
	assert_near(p.prompt_tokens, 2000);
	assert_near(p.output_tokens, 500);
	assert_near(p.choices, 1);
	assert_true(fabs(p.units - 3794.53) < 0.01);
	/* flat, the seed's arithmetic: 2,000 + 500 x 3.09 units */
	cm.output_pricing = FG_OUTPUT_FLAT;
	p = fg_price_request(&cm, FG_METER_REPLICA_TIME, &cal, "llama", &s, 256);
	assert_near(p.units, 2000 + 500 * cm.output_weight);
	assert_true(fabs(p.units - 3545) < 0.005 * 3545);
	cm.output_pricing = FG_OUTPUT_CONTEXT;

	s.prompt_chars = 8001; /* a partial token is a token */
	p = fg_price_request(&cm, FG_METER_REPLICA_TIME, &cal, "llama", &s, 256);
	assert_near(p.prompt_tokens, 2001);
}

static void token_id_prompts_are_counted_exactly(void **state)
{
	(void)state;
	struct fg_cost_model cm = seed_model();
	struct fg_calibration cal;
	struct fg_request_shape s = { .prompt_token_ids = 777, .n = 1, .max_tokens = 1 };

	fg_calibration_init(&cal);
	struct fg_price p = fg_price_request(&cm, FG_METER_REPLICA_TIME, &cal, "m", &s, 0);
	assert_near(p.prompt_tokens, 777);
}

static void output_reservation_is_n_times_the_max(void **state)
{
	(void)state;
	struct fg_cost_model cm = seed_model();
	struct fg_calibration cal;
	struct fg_request_shape s = { .prompt_chars = 0, .n = 3, .max_tokens = 200 };

	fg_calibration_init(&cal);
	struct fg_price p = fg_price_request(&cm, FG_METER_REPLICA_TIME, &cal, "m", &s, 999);
	assert_near(p.output_tokens, 600);
	assert_near(p.choices, 3);
	/* the worst case: each of the 3 choices decodes 199 steps from an empty
	 * prompt (contexts 1..199, t(100) = 1.6298 units) */
	assert_true(fabs(p.units - 973.03) < 0.01);
	s.max_tokens = 0; /* absent: the tier default */
	p = fg_price_request(&cm, FG_METER_REPLICA_TIME, &cal, "m", &s, 999);
	assert_near(p.output_tokens, 3 * 999);
	p = fg_price_request(&cm, FG_METER_REPLICA_TIME, &cal, "m", &s, 0);
	assert_near(p.output_tokens, 3 * FG_FALLBACK_MAX_TOKENS);
	s.n = 0; /* absent n is one choice */
	p = fg_price_request(&cm, FG_METER_REPLICA_TIME, &cal, "m", &s, 10);
	assert_near(p.output_tokens, 10);
	assert_near(p.choices, 1);
	s.prompt_only = true; /* embeddings produce no output */
	s.prompt_chars = 40;
	p = fg_price_request(&cm, FG_METER_REPLICA_TIME, &cal, "m", &s, 10);
	assert_near(p.output_tokens, 0);
	assert_near(p.units, 10);
}

static void metering_modes_come_from_the_cost_model(void **state)
{
	(void)state;
	struct fg_cost_model cm = seed_model();
	struct fg_calibration cal;
	struct fg_request_shape s = { .prompt_chars = 400, .n = 1, .max_tokens = 50 };

	fg_calibration_init(&cal);
	struct fg_price p = fg_price_request(&cm, FG_METER_RAW_TOKENS, &cal, "m", &s, 0);
	assert_near(p.units, 150);
	p = fg_price_request(&cm, FG_METER_REQUESTS, &cal, "m", &s, 0);
	assert_near(p.units, fg_metered_units(&cm, FG_METER_REQUESTS, 100, 0, 50));
}

static void calibration_converges_and_stays_bounded(void **state)
{
	(void)state;
	struct fg_calibration cal;

	fg_calibration_init(&cal);
	fg_calibration_learn(&cal, "llama", 3000, 1000); /* 3 chars per token */
	double one = fg_chars_per_token(&cal, "llama");
	assert_true(one < 4.0 && one > 3.0); /* one step, not a jump */
	for (int i = 0; i < 200; i++)
		fg_calibration_learn(&cal, "llama", 3000, 1000);
	assert_true(fabs(fg_chars_per_token(&cal, "llama") - 3.0) < 0.01);

	/* absurd observations clamp to the bounds */
	for (int i = 0; i < 500; i++)
		fg_calibration_learn(&cal, "llama", 10000000, 1);
	assert_near(fg_chars_per_token(&cal, "llama"), FG_CPT_MAX);
	for (int i = 0; i < 500; i++)
		fg_calibration_learn(&cal, "llama", 1, 1000000);
	assert_near(fg_chars_per_token(&cal, "llama"), FG_CPT_MIN);

	/* nothing learned from empty observations */
	double before = fg_chars_per_token(&cal, "llama");
	fg_calibration_learn(&cal, "llama", 0, 10);
	fg_calibration_learn(&cal, "llama", 10, 0);
	assert_near(fg_chars_per_token(&cal, "llama"), before);
}

static void calibration_is_per_model_and_table_is_bounded(void **state)
{
	(void)state;
	struct fg_calibration cal;
	char name[32];
	char longname[FG_CAL_MODEL_MAX + 10];

	fg_calibration_init(&cal);
	for (int i = 0; i < 100; i++)
		fg_calibration_learn(&cal, "a", 2000, 1000);
	assert_true(fabs(fg_chars_per_token(&cal, "a") - 2.0) < 0.01);
	/* an unseen model starts from what the node learned (the default slot) */
	assert_true(fabs(fg_chars_per_token(&cal, "never-seen") - 2.0) < 0.01);
	for (int i = 0; i < 100; i++)
		fg_calibration_learn(&cal, "b", 6000, 1000);
	assert_true(fabs(fg_chars_per_token(&cal, "a") - 2.0) < 0.01);
	assert_true(fabs(fg_chars_per_token(&cal, "b") - 6.0) < 0.01);

	for (int i = 0; i < 3 * FG_CAL_MODELS; i++) {
		snprintf(name, sizeof(name), "model-%d", i);
		fg_calibration_learn(&cal, name, 4000, 1000);
	}
	assert_int_equal(cal.n, FG_CAL_MODELS);
	memset(longname, 'x', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = 0;
	fg_calibration_learn(&cal, longname, 4000, 1000); /* no overflow, no slot */
	assert_int_equal(cal.n, FG_CAL_MODELS);
	assert_true(fg_chars_per_token(&cal, longname) >= FG_CPT_MIN);
}

static void settlement_prices_cached_and_output(void **state)
{
	(void)state;
	struct fg_cost_model cm = seed_model();
	struct fg_price reserved = { .prompt_tokens = 2000, .output_tokens = 500, .choices = 1 };
	struct fg_usage u = { .prompt_tokens = 2000, .cached_tokens = 1500, .completion_tokens = 500 };

	/* (prompt - cached) + cached x 0.1 + 499 decode steps at t(2,250),
	 * 3.5963 units: cached tokens are read by every step all the same */
	assert_true(fabs(fg_settle_units(&cm, FG_METER_REPLICA_TIME, &reserved, &u) - 2444.53) < 0.01);
	u.cached_tokens = 9999; /* more cached than prompt: all of it cached */
	assert_true(fabs(fg_settle_units(&cm, FG_METER_REPLICA_TIME, &reserved, &u) - 1994.53) < 0.01);
	/* flat: completion x output_weight */
	cm.output_pricing = FG_OUTPUT_FLAT;
	u.cached_tokens = 1500;
	assert_near(fg_settle_units(&cm, FG_METER_REPLICA_TIME, &reserved, &u),
		    500 + 1500 * 0.1 + 500 * cm.output_weight);
}

/* Usage sums the completion over the n choices; each choice decoded from
 * the prompt on its own, and the equal split of the sum never bills more
 * than the choices cost, however they were really split. */
static void settlement_splits_choices_equally(void **state)
{
	(void)state;
	struct fg_cost_model cm = seed_model();
	struct fg_price reserved = { .prompt_tokens = 32768, .output_tokens = 400, .choices = 4 };
	struct fg_usage u = { .prompt_tokens = 32768, .completion_tokens = 400 };

	/* all four ran to max: 4 x 99 steps centred on 32,818 (31.554 units) */
	double full = fg_settle_units(&cm, FG_METER_REPLICA_TIME, &reserved, &u);
	assert_true(fabs(full - (32768 + 4 * 99 * 31.554)) < 0.01 * 4 * 99);
	/* 200 between them is billed as 4 x 50: 4 x 49 steps at t(32,793),
	 * 31.531 units ... */
	u.completion_tokens = 200;
	double half = fg_settle_units(&cm, FG_METER_REPLICA_TIME, &reserved, &u);
	assert_true(fabs(half - (32768 + 6180.07)) < 0.01);
	/* ... which is less than the split it could have been that costs
	 * the most (one choice of 200 and three of none: 199 steps at
	 * t(32,868), 6,288.3) and less than any other way of producing them */
	assert_true(half < 32768 + 6288.3);
	assert_true(half - 32768 <= fg_output_units(&cm, 32768, 150, 1) +
				     fg_output_units(&cm, 32768, 50, 1) + 1e-9);
	/* a choices count the caller left at zero is one choice */
	reserved.choices = 0;
	assert_true(fabs(fg_settle_units(&cm, FG_METER_REPLICA_TIME, &reserved, &u) - 32768 - 6288.3) <
		    0.05);
}

static void settlement_bills_what_was_asked_for(void **state)
{
	(void)state;
	struct fg_cost_model cm = seed_model();
	struct fg_price reserved = { .prompt_tokens = 100, .output_tokens = 64, .choices = 1 };
	/* an engine that recomputed a preempted sequence reports more output */
	struct fg_usage u = { .prompt_tokens = 100, .completion_tokens = 200 };

	/* 63 decode steps from 101 to 163, t(132) = 1.6591 units */
	assert_true(fabs(fg_settle_units(&cm, FG_METER_REPLICA_TIME, &reserved, &u) - 204.525) < 0.001);
	/* fewer than reserved: billed as produced (9 steps, t(105) = 1.6344) */
	u.completion_tokens = 10;
	assert_true(fabs(fg_settle_units(&cm, FG_METER_REPLICA_TIME, &reserved, &u) - 114.710) < 0.001);
	cm.output_pricing = FG_OUTPUT_FLAT;
	u.completion_tokens = 200;
	assert_near(fg_settle_units(&cm, FG_METER_REPLICA_TIME, &reserved, &u),
		    100 + 64 * cm.output_weight);
	/* garbage usage bills nothing rather than refunding more than reserved */
	u = (struct fg_usage){ .prompt_tokens = -5, .cached_tokens = -1, .completion_tokens = -3 };
	assert_near(fg_settle_units(&cm, FG_METER_REPLICA_TIME, &reserved, &u), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(estimate_starts_at_four_chars_per_token),
		cmocka_unit_test(token_id_prompts_are_counted_exactly),
		cmocka_unit_test(output_reservation_is_n_times_the_max),
		cmocka_unit_test(metering_modes_come_from_the_cost_model),
		cmocka_unit_test(calibration_converges_and_stays_bounded),
		cmocka_unit_test(calibration_is_per_model_and_table_is_bounded),
		cmocka_unit_test(settlement_prices_cached_and_output),
		cmocka_unit_test(settlement_bills_what_was_asked_for),
		cmocka_unit_test(settlement_splits_choices_equally),
	};
	return cmocka_run_group_tests_name("pricing", tests, NULL, NULL);
}
