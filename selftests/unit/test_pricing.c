/* test_pricing.c — prompt estimates (text at a ratio, the chat template's
 * framing, media parts, token ids, several prompts), bounded per-tenant
 * chars-per-token calibration, output reservations and settlement prices
 * (all through the cost model). */
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

static struct fg_policy *pol;

static int setup(void **state)
{
	(void)state;
	pol = test_malloc(sizeof(*pol));
	fg_policy_defaults(pol);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	test_free(pol);
	return 0;
}

static struct fg_cost_model seed_model(void)
{
	struct fg_cost_model cm;

	fg_cost_model_init(&cm, &pol->replica);
	return cm;
}

/* The price of a shape at the prior, with a room that never binds. */
static struct fg_price price(const struct fg_cost_model *cm, enum fg_metering mode,
			     const struct fg_request_shape *s, uint32_t tier_default)
{
	struct fg_prompt_est e = fg_estimate_prompt(&pol->replica.model, 4.0, s);

	return fg_price_request(cm, mode, &e, s, tier_default, UINT64_MAX);
}

static void estimate_starts_at_four_chars_per_token(void **state)
{
	(void)state;
	struct fg_cost_model cm = seed_model();
	struct fg_calibration cal;
	struct fg_request_shape s = { .prompt_chars = 8000, .n = 1, .max_tokens = 500 };

	fg_calibration_init(&cal);
	assert_near(fg_chars_per_token(&cal, 1, pol->replica.model.chars_per_token), 4.0);
	struct fg_price p = price(&cm, FG_METER_REPLICA_TIME, &s, 256);
	/* the seed's request, 2,000 in and 500 out, priced by context: 499
	 * decode steps from 2,001 to 2,499 tokens at t(2,250) = 3.5963 units */
	assert_near(p.prompt_tokens, 2000);
	assert_near(p.output_tokens, 500);
	assert_int_equal(p.per_choice, 500);
	assert_int_equal(p.sequences, 1);
	assert_true(fabs(p.units - 3794.53) < 0.01);
	/* flat, the seed's arithmetic: 2,000 + 500 x 3.09 units */
	cm.output_pricing = FG_OUTPUT_FLAT;
	p = price(&cm, FG_METER_REPLICA_TIME, &s, 256);
	assert_near(p.units, 2000 + 500 * cm.output_weight);
	assert_true(fabs(p.units - 3545) < 0.005 * 3545);
	cm.output_pricing = FG_OUTPUT_CONTEXT;

	s.prompt_chars = 8001; /* a partial token is a token */
	p = price(&cm, FG_METER_REPLICA_TIME, &s, 256);
	assert_near(p.prompt_tokens, 2001);
}

/* Issue #20's conversation: 20,000 messages the engine counted at 180,003
 * tokens (3 + 20,000 x (4 framing + 5 text)); the estimate that ignored
 * the template said ~127.5K. */
static void chat_framing_is_counted_per_message(void **state)
{
	(void)state;
	struct fg_model rule = pol->replica.model;
	struct fg_request_shape s = { .prompt_chars = 20000 * 20, .messages = 20000, .chat = true,
				      .n = 1, .max_tokens = 1 };

	rule.message_tokens = 4; /* the simulator's template */
	rule.reply_tokens = 3;
	struct fg_prompt_est e = fg_estimate_prompt(&rule, 4.0, &s);
	assert_near(e.tokens, 180003);
	assert_near(e.fixed, 80003);
	/* the policy's default: Llama 3's 5 per message and 5 per request */
	e = fg_estimate_prompt(&pol->replica.model, 4.0, &s);
	assert_near(e.tokens, 100000 + 20000 * 5 + 5);
	/* what its bytes can make at most: every byte a token, the framing
	 * twice and some slack a message (so a framing prior of 0 still holds) */
	assert_near(e.tokens_max, 400000 + 2 * 100005 + 20000 * FG_MESSAGE_SLACK + FG_PROMPT_SLACK);
	rule.message_tokens = rule.reply_tokens = 0;
	e = fg_estimate_prompt(&rule, 4.0, &s);
	assert_true(e.tokens_max >= 180003);
}

static void media_parts_are_a_fixed_count(void **state)
{
	(void)state;
	struct fg_model rule = pol->replica.model;
	struct fg_request_shape s = { .prompt_chars = 40, .messages = 1, .chat = true, .images = 2,
				      .audios = 1, .n = 1 };

	rule.image_tokens = 576;
	rule.audio_tokens = 300;
	rule.message_tokens = rule.reply_tokens = 0;
	struct fg_prompt_est e = fg_estimate_prompt(&rule, 4.0, &s);
	assert_near(e.tokens, 10 + 2 * 576 + 300);
	assert_near(e.fixed, 2 * 576 + 300);
}

static void token_id_prompts_are_counted_exactly(void **state)
{
	(void)state;
	struct fg_cost_model cm = seed_model();
	struct fg_request_shape s = { .prompt_token_ids = 777, .n = 1, .max_tokens = 1 };

	struct fg_price p = price(&cm, FG_METER_REPLICA_TIME, &s, 0);
	assert_near(p.prompt_tokens, 777);
}

/* A completions prompt array runs every prompt as its own sequence, n
 * choices each: all of them are priced and capped. */
static void several_prompts_are_several_sequences(void **state)
{
	(void)state;
	struct fg_cost_model cm = seed_model();
	struct fg_request_shape s = { .prompt_chars = 4000 + 400 + 40, .prompts = 3,
				      .longest_chars = 4000, .n = 2, .max_tokens = 100 };
	struct fg_prompt_est e = fg_estimate_prompt(&pol->replica.model, 4.0, &s);

	assert_near(e.tokens, 1110);
	assert_near(e.longest, 1000);
	struct fg_price p = fg_price_request(&cm, FG_METER_REPLICA_TIME, &e, &s, 0, UINT64_MAX);
	assert_int_equal(p.sequences, 6);
	assert_near(p.output_tokens, 600);
	/* priced by context, each sequence decodes from its own prompt: the
	 * batch's sum over its three prompts (1,000, 100 and 10 tokens), two
	 * choices each, equals six sequences from their mean (the output term
	 * is affine in the prompt) */
	assert_near(p.units, 1110 + 2 * (fg_output_units(&cm, 1000, 100, 1) +
					 fg_output_units(&cm, 100, 100, 1) +
					 fg_output_units(&cm, 10, 100, 1)));
	cm.output_pricing = FG_OUTPUT_FLAT;
	p = fg_price_request(&cm, FG_METER_REPLICA_TIME, &e, &s, 0, UINT64_MAX);
	assert_near(p.units, 1110 + 600 * cm.output_weight);
	cm.output_pricing = FG_OUTPUT_CONTEXT;
	/* no exact count stands for three prompts */
	s.exact_prompt_tokens = 5;
	e = fg_estimate_prompt(&pol->replica.model, 4.0, &s);
	assert_false(e.exact);
}

static void output_reservation_is_every_sequence_times_the_max(void **state)
{
	(void)state;
	struct fg_cost_model cm = seed_model();
	struct fg_request_shape s = { .prompt_chars = 0, .n = 3, .max_tokens = 200 };

	struct fg_price p = price(&cm, FG_METER_REPLICA_TIME, &s, 999);
	assert_near(p.output_tokens, 600);
	assert_int_equal(p.sequences, 3);
	/* the worst case: each of the 3 choices decodes 199 steps from an empty
	 * prompt (contexts 1..199, t(100) = 1.6298 units) */
	assert_true(fabs(p.units - 973.03) < 0.01);
	s.max_tokens = 0; /* absent: the tier default */
	p = price(&cm, FG_METER_REPLICA_TIME, &s, 999);
	assert_near(p.output_tokens, 3 * 999);
	assert_int_equal(p.per_choice, 999);
	p = price(&cm, FG_METER_REPLICA_TIME, &s, 0);
	assert_near(p.output_tokens, 3 * FG_FALLBACK_MAX_TOKENS);
	s.n = 0; /* absent n is one choice */
	p = price(&cm, FG_METER_REPLICA_TIME, &s, 10);
	assert_near(p.output_tokens, 10);
	assert_int_equal(p.sequences, 1);
	/* no cap named and little context left: what the context leaves, as
	 * the engine does (max_model_len - prompt) */
	struct fg_prompt_est e = fg_estimate_prompt(&pol->replica.model, 4.0, &s);
	p = fg_price_request(&cm, FG_METER_REPLICA_TIME, &e, &s, 1024, 300);
	assert_int_equal(p.per_choice, 300);
	p = fg_price_request(&cm, FG_METER_REPLICA_TIME, &e, &s, 1024, 0);
	assert_int_equal(p.per_choice, 1);
	s.max_tokens = 700; /* a cap the client named stays (the limit check refuses it) */
	p = fg_price_request(&cm, FG_METER_REPLICA_TIME, &e, &s, 1024, 300);
	assert_int_equal(p.per_choice, 700);
	s.max_tokens = 0;
	s.prompt_only = true; /* embeddings produce no output */
	s.prompt_chars = 40;
	p = price(&cm, FG_METER_REPLICA_TIME, &s, 10);
	assert_near(p.output_tokens, 0);
	assert_int_equal(p.per_choice, 0);
	assert_near(p.units, 10);
}

static void metering_modes_come_from_the_cost_model(void **state)
{
	(void)state;
	struct fg_cost_model cm = seed_model();
	struct fg_request_shape s = { .prompt_chars = 400, .n = 1, .max_tokens = 50 };

	struct fg_price p = price(&cm, FG_METER_RAW_TOKENS, &s, 0);
	assert_near(p.units, 150);
	p = price(&cm, FG_METER_REQUESTS, &s, 0);
	assert_near(p.units, fg_metered_units(&cm, FG_METER_REQUESTS, 100, 0, 50));
}

/* Passthrough paths cost what the policy says; the tokenizer endpoints are
 * priced like prefix-cache hits; both are billed their reservation. */
static void flat_prices_settle_at_the_reservation(void **state)
{
	(void)state;
	struct fg_cost_model cm = seed_model();
	struct fg_request_shape pass = { .fixed_units = 42, .n = 1 };
	struct fg_request_shape tok = { .prompt_chars = 4000, .prompt_only = true, .no_gpu = true };
	struct fg_usage u = { .prompt_tokens = 99999, .completion_tokens = 99999 };

	struct fg_price p = price(&cm, FG_METER_REPLICA_TIME, &pass, 0);
	assert_near(p.units, 42);
	assert_true(p.flat);
	assert_near(fg_settle_units(&cm, FG_METER_REPLICA_TIME, &p, &u), 42);
	p = price(&cm, FG_METER_REPLICA_TIME, &tok, 0);
	assert_near(p.units, fg_metered_units(&cm, FG_METER_REPLICA_TIME, 1000, 1000, 0));
	assert_near(p.units, 1000 * pol->replica.cached_prompt_weight);
	assert_near(fg_settle_units(&cm, FG_METER_REPLICA_TIME, &p, &u), p.units);
}

static void an_exact_count_replaces_the_estimate(void **state)
{
	(void)state;
	struct fg_request_shape s = { .prompt_chars = 8000, .messages = 3, .chat = true, .n = 1,
				      .exact_prompt_tokens = 4321 };
	struct fg_prompt_est e = fg_estimate_prompt(&pol->replica.model, 16.0, &s);

	assert_true(e.exact);
	assert_near(e.tokens, 4321);
	assert_near(e.longest_safe, 4321);
	assert_near(e.tokens_safe, 4321);
	assert_true(e.tokens_max >= 4321);
}

/* Limits use the larger count of the tenant's ratio and the prior's; the
 * bytes bound is never below either. */
static void limit_estimates_are_conservative(void **state)
{
	(void)state;
	struct fg_request_shape s = { .prompt_chars = 16000, .messages = 2, .chat = true, .n = 1 };
	struct fg_prompt_est e = fg_estimate_prompt(&pol->replica.model, 8.0, &s);

	assert_near(e.tokens, 2000 + 15);
	assert_near(e.tokens_safe, 4000 + 15); /* at the prior's 4 */
	assert_true(e.tokens_max >= 16000);
	e = fg_estimate_prompt(&pol->replica.model, 2.0, &s);
	assert_near(e.tokens, 8000 + 15);
	assert_near(e.tokens_safe, 8000 + 15); /* the tenant's denser text wins */
}

static void calibration_converges_and_stays_bounded(void **state)
{
	(void)state;
	struct fg_calibration cal;
	double prior = 4.0;

	fg_calibration_init(&cal);
	fg_calibration_learn(&cal, 1, prior, 3000, 1000); /* 3 chars per token */
	double one = fg_chars_per_token(&cal, 1, prior);
	assert_true(one < 4.0 && one > 3.0); /* one step, not a jump */
	for (int i = 0; i < 200; i++)
		fg_calibration_learn(&cal, 1, prior, 3000, 1000);
	assert_true(fabs(fg_chars_per_token(&cal, 1, prior) - 3.0) < 0.01);

	/* absurd observations clamp to the bounds: never above the prior x 2,
	 * never below a byte per token */
	for (int i = 0; i < 500; i++)
		fg_calibration_learn(&cal, 1, prior, 10000000, 1);
	assert_near(fg_chars_per_token(&cal, 1, prior), prior * FG_CPT_OVER_PRIOR);
	for (int i = 0; i < 500; i++)
		fg_calibration_learn(&cal, 1, prior, 1, 1000000);
	assert_near(fg_chars_per_token(&cal, 1, prior), FG_CPT_MIN);

	/* nothing learned from empty observations */
	double before = fg_chars_per_token(&cal, 1, prior);
	fg_calibration_learn(&cal, 1, prior, 0, 10);
	fg_calibration_learn(&cal, 1, prior, 10, 0);
	fg_calibration_learn(&cal, 1, prior, 10, 0.5);
	fg_calibration_learn(&cal, 0, prior, 10, 10);
	assert_near(fg_chars_per_token(&cal, 1, prior), before);
	assert_int_equal(sizeof(struct fg_calibration), 8 * FG_CAL_SLOTS);
}

/* Estimates that came out low (more tokens than thought) are corrected
 * twice as fast as the other way. */
static void low_estimates_are_corrected_faster(void **state)
{
	(void)state;
	struct fg_calibration down, up;
	double prior = 4.0;

	fg_calibration_init(&down);
	fg_calibration_init(&up);
	fg_calibration_learn(&down, 1, prior, 2000, 1000); /* 2 chars/token */
	fg_calibration_learn(&up, 1, prior, 6000, 1000);   /* 6 chars/token */
	assert_near(fg_chars_per_token(&down, 1, prior), 4.0 - FG_CPT_STEP_DOWN * 2);
	assert_near(fg_chars_per_token(&up, 1, prior), 4.0 + FG_CPT_STEP_UP * 2);
	assert_true(FG_CPT_STEP_DOWN > FG_CPT_STEP_UP);
}

static void calibration_is_per_model_and_slots_are_bounded(void **state)
{
	(void)state;
	struct fg_calibration cal;
	struct fg_cal_models names = { 0 };
	char name[32], longname[FG_CAL_MODEL_MAX + 10];
	double prior = 4.0;

	fg_calibration_init(&cal);
	int a = fg_cal_model_add(&names, "a"), b = fg_cal_model_add(&names, "b");
	assert_int_equal(fg_cal_model_add(&names, "a"), a);
	assert_int_equal(fg_cal_model_find(&names, "b"), b);
	assert_int_equal(fg_cal_model_find(&names, "never-seen"), 0);
	for (int i = 0; i < 100; i++)
		fg_calibration_learn(&cal, a, prior, 2000, 1000);
	assert_true(fabs(fg_chars_per_token(&cal, a, prior) - 2.0) < 0.01);
	/* an unseen model starts from the prior, not from another model */
	assert_near(fg_chars_per_token(&cal, b, prior), prior);
	assert_near(fg_chars_per_token(&cal, 0, prior), prior);
	for (int i = 0; i < 100; i++)
		fg_calibration_learn(&cal, b, prior, 6000, 1000);
	assert_true(fabs(fg_chars_per_token(&cal, a, prior) - 2.0) < 0.01);
	assert_true(fabs(fg_chars_per_token(&cal, b, prior) - 6.0) < 0.01);

	/* more models than slots: the least-taught slot goes back to the prior */
	for (int m = 0; m < FG_CAL_SLOTS + 2; m++) {
		snprintf(name, sizeof(name), "model-%d", m);
		int k = fg_cal_model_add(&names, name);
		fg_calibration_learn(&cal, k, prior, 3000, 1000);
	}
	assert_true(fabs(fg_chars_per_token(&cal, a, prior) - 2.0) < 0.01); /* 100 samples: kept */
	memset(longname, 'x', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = 0;
	assert_int_equal(fg_cal_model_add(&names, longname), 0); /* no overflow, no name */
	for (int i = (int)names.n; i < FG_CAL_MODELS + 5; i++) {
		snprintf(name, sizeof(name), "m%d", i);
		fg_cal_model_add(&names, name);
	}
	assert_int_equal(names.n, FG_CAL_MODELS);
	assert_int_equal(fg_cal_model_add(&names, "one-too-many"), 0);
}

static void settlement_prices_cached_and_output(void **state)
{
	(void)state;
	struct fg_cost_model cm = seed_model();
	struct fg_price reserved = { .prompt_tokens = 2000, .output_tokens = 500, .sequences = 1 };
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
	struct fg_price reserved = { .prompt_tokens = 32768, .output_tokens = 400, .sequences = 4 };
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
	/* a sequence count the caller left at zero is one choice */
	reserved.sequences = 0;
	assert_true(fabs(fg_settle_units(&cm, FG_METER_REPLICA_TIME, &reserved, &u) - 32768 - 6288.3) <
		    0.05);
}

static void settlement_bills_what_was_asked_for(void **state)
{
	(void)state;
	struct fg_cost_model cm = seed_model();
	struct fg_price reserved = { .prompt_tokens = 100, .output_tokens = 64, .sequences = 1,
				     .prompt_ceiling = 500 };
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
	/* fewer than reserved: billed as produced */
	u.completion_tokens = 10;
	assert_near(fg_settle_units(&cm, FG_METER_REPLICA_TIME, &reserved, &u),
		    100 + 10 * cm.output_weight);
	/* a prompt the estimate missed is billed as the engine counts it ... */
	u.prompt_tokens = 400;
	assert_near(fg_settle_units(&cm, FG_METER_REPLICA_TIME, &reserved, &u),
		    400 + 10 * cm.output_weight);
	/* ... up to what its bytes can make */
	u.prompt_tokens = 100000;
	assert_near(fg_settle_units(&cm, FG_METER_REPLICA_TIME, &reserved, &u),
		    500 + 10 * cm.output_weight);
	/* garbage usage bills nothing rather than refunding more than reserved */
	u = (struct fg_usage){ .prompt_tokens = -5, .cached_tokens = -1, .completion_tokens = -3 };
	assert_near(fg_settle_units(&cm, FG_METER_REPLICA_TIME, &reserved, &u), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(estimate_starts_at_four_chars_per_token),
		cmocka_unit_test(chat_framing_is_counted_per_message),
		cmocka_unit_test(media_parts_are_a_fixed_count),
		cmocka_unit_test(token_id_prompts_are_counted_exactly),
		cmocka_unit_test(several_prompts_are_several_sequences),
		cmocka_unit_test(output_reservation_is_every_sequence_times_the_max),
		cmocka_unit_test(metering_modes_come_from_the_cost_model),
		cmocka_unit_test(flat_prices_settle_at_the_reservation),
		cmocka_unit_test(an_exact_count_replaces_the_estimate),
		cmocka_unit_test(limit_estimates_are_conservative),
		cmocka_unit_test(calibration_converges_and_stays_bounded),
		cmocka_unit_test(low_estimates_are_corrected_faster),
		cmocka_unit_test(calibration_is_per_model_and_slots_are_bounded),
		cmocka_unit_test(settlement_prices_cached_and_output),
		cmocka_unit_test(settlement_bills_what_was_asked_for),
		cmocka_unit_test(settlement_splits_choices_equally),
	};
	return cmocka_run_group_tests_name("pricing", tests, setup, teardown);
}
