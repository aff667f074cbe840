/* test_json_tok.c — lib/json_tok.c on its own: the tokens (kinds, offsets,
 * decoded lengths) of valid texts, the same whatever the reads' cuts,
 * every JSON text jansson accepts accepted and every one it refuses
 * refused (for the rules the tokenizer owns: grammar, UTF-8, escapes), and
 * plain runs of every length with a special byte at every position (the
 * 16- and 32-byte steps of the string scan). */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "lib/json_tok.h"

#define MAX_TOKS 4096

struct toks {
	size_t n;
	struct fg_jt_token t[MAX_TOKS];
};

static int collect(void *ctx, const char *text, const struct fg_jt_token *t)
{
	struct toks *k = ctx;

	(void)text;
	if (k->n < MAX_TOKS)
		k->t[k->n++] = *t;
	return 1;
}

/* Tokenize text fed in reads ending at every `step` bytes (0: one read),
 * each read in a buffer of its own (the text moves); the final status. */
static enum fg_jt_status tokenize(const char *text, size_t len, size_t step, struct toks *out)
{
	struct fg_jt j;
	enum fg_jt_status st = FG_JT_MORE;
	char *buf = NULL;

	fg_jt_init(&j);
	out->n = 0;
	for (size_t at = step; step && at < len && st == FG_JT_MORE; at += step) {
		char *moved = malloc(at);
		memcpy(moved, text, at);
		free(buf);
		buf = moved;
		st = fg_jt_feed(&j, buf, at, collect, out);
	}
	free(buf);
	buf = malloc(len ? len : 1);
	memcpy(buf, text, len);
	if (st == FG_JT_MORE)
		st = fg_jt_finish(&j, buf, len, collect, out);
	free(buf);
	return st;
}

static void same_in_every_cutting(const char *text, size_t len)
{
	struct toks *whole = malloc(sizeof(*whole)), *cut = malloc(sizeof(*cut));
	enum fg_jt_status st = tokenize(text, len, 0, whole);

	for (size_t step = 1; step <= len; step++) {
		assert_int_equal(tokenize(text, len, step, cut), st);
		if (st == FG_JT_DONE) {
			assert_int_equal(cut->n, whole->n);
			for (size_t i = 0; i < whole->n; i++) {
				const struct fg_jt_token *a = &cut->t[i], *b = &whole->t[i];
				if (a->kind != b->kind || a->start != b->start || a->end != b->end ||
				    a->decoded_len != b->decoded_len || a->escaped != b->escaped)
					fail_msg("token %zu differs in reads of %zu bytes: '%.*s'", i,
						 step, (int)len, text);
			}
		}
	}
	free(whole);
	free(cut);
}

static void tokens_of_a_body(void **state)
{
	(void)state;
	const char *text = " {\"a\" : [1, -2.5e+3, true,false ,null],\"b\\n\":\"x\\u00e9\\ud83d\\ude00y\","
			   "\"c\":{},\"d\":[],\"e\":0}\r\n";
	struct toks *k = malloc(sizeof(*k));

	assert_int_equal(tokenize(text, strlen(text), 0, k), FG_JT_DONE);
	static const enum fg_jt_kind kinds[] = {
		FG_JT_START_MAP, FG_JT_KEY, FG_JT_START_ARRAY, FG_JT_NUMBER, FG_JT_NUMBER, FG_JT_TRUE,
		FG_JT_FALSE, FG_JT_NULL, FG_JT_END_ARRAY, FG_JT_KEY, FG_JT_STRING, FG_JT_KEY,
		FG_JT_START_MAP, FG_JT_END_MAP, FG_JT_KEY, FG_JT_START_ARRAY, FG_JT_END_ARRAY,
		FG_JT_KEY, FG_JT_NUMBER, FG_JT_END_MAP,
	};
	assert_int_equal(k->n, sizeof(kinds) / sizeof(kinds[0]));
	for (size_t i = 0; i < k->n; i++)
		assert_int_equal(k->t[i].kind, kinds[i]);
	/* offsets: each token's own bytes */
	assert_int_equal(k->t[0].start, 1);
	assert_int_equal(k->t[1].start, 2);
	assert_int_equal(k->t[1].end, 5);
	assert_memory_equal(text + k->t[4].start, "-2.5e+3", 7);
	assert_int_equal(k->t[4].end - k->t[4].start, 7);
	/* "b\n" is two bytes decoded; "x\u00e9\ud83d\ude00y": x, 2, 4, y */
	assert_true(k->t[9].escaped);
	assert_int_equal(k->t[9].decoded_len, 2);
	assert_int_equal(k->t[10].decoded_len, 1 + 2 + 4 + 1);
	char out[64];
	size_t n = fg_jt_unescape(text + k->t[10].start + 1, k->t[10].end - k->t[10].start - 2, out);
	assert_int_equal(n, 8);
	assert_memory_equal(out, "x\xc3\xa9\xf0\x9f\x98\x80y", 8);
	assert_false(k->t[18].escaped);
	assert_memory_equal(text + k->t[18].start, "0", 1);
	free(k);
	same_in_every_cutting(text, strlen(text));
}

/* jansson's verdict (any value at the top, NUL refused) is the tokenizer's. */
static void check_against_jansson(const char *text, size_t len)
{
	json_t *v = json_loadb(text, len, JSON_DECODE_ANY, NULL);
	struct toks *k = malloc(sizeof(*k));
	enum fg_jt_status st = tokenize(text, len, 0, k);

	free(k);
	/* jansson refuses numbers out of its range, which is the reader's rule, not the tokenizer's */
	if (!v && st == FG_JT_DONE && strpbrk(text, "0123456789"))
		goto out;
	if ((v != NULL) != (st == FG_JT_DONE))
		fail_msg("jansson %s, tokenizer %d: '%.*s'", v ? "accepts" : "refuses", st, (int)len,
			 text);
	same_in_every_cutting(text, len);
out:
	json_decref(v);
}

static void verdicts_as_jansson(void **state)
{
	(void)state;
	static const char *const texts[] = {
		"{}", "[]", "0", "-0", "1.5", "1e5", "1E-5", "-12.50e+003", "\"\"", "true", "null",
		" [ 1 , 2 ] ", "{\"a\":{\"b\":[[],{}]}}", "\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"",
		"\"\\u0041\\u00E9\\uFFFF\\uD800\\uDC00\"", "\"h\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"",
		"\"\xef\xbf\xbf\xf4\x8f\xbf\xbf\xed\x9f\xbf\xee\x80\x80\"",
		/* refused */
		"", " ", "{", "}", "[1,]", "[,1]", "{\"a\"}", "{\"a\":}", "{\"a\":1,}", "{1:2}", "[1 2]",
		"01", "1.", ".5", "-", "-a", "1e", "1e+", "+1", "0x1", "tru", "nul", "falsey", "True",
		"[1]]", "{}{}", "{} x", "\"abc", "\"a\\\"", "\"\\x\"", "\"\\u12\"", "\"\\u12g4\"",
		"\"\\u0000\"", "\"\\uD800\"", "\"\\uDC00\"", "\"\\uD800\\u0041\"", "\"\\uD800x\"",
		"\"\\uD800\\\\\"", "\"a\tb\"", "\"a\nb\"", "\"\x7f\"", "\"\xc0\x80\"", "\"\xc1\xbf\"",
		"\"\xe0\x80\xaf\"", "\"\xed\xa0\x80\"", "\"\xf0\x80\x80\x80\"", "\"\xf4\x90\x80\x80\"",
		"\"\xf5\x80\x80\x80\"", "\"\x80\"", "\"\xc3\"", "\"\xe2\x82\"", "\"\xc3(\"", "\xef\xbb\xbf{}",
		"{}\f", "\v[]", "[1]\x80", "/*c*/{}", "[\"a\"\"b\"]",
		/* runs of non-ASCII text (the three-byte path) and of escapes */
		"\"\xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c abcdefghij\xee\x80\x80\xef\xbf\xbd\xc3\xa9\xf0\x9f\x98\x80\"",
		"\"\xe4\xbd\x28\"", "\"\xe4\xbd\"", "\"\xee\x80\xc0\"", "\"\xe1\x80\"", "\"\xe4\xbd\xa0\xe4\"",
		"\"\xe4\xbd\xa0\x01\"", "\"\xe4\xbd\xa0\\n\xe4\xbd\xa0\"", "\"\xed\x9f\xbf\xed\xa0\x80\"",
		"\"\\n\\t\\u00e9\\u20AC\\uFFFD\\uDBFF\\uDFFF\\u0001\\/\\\\\"", "\"\\u00\"",
		"\"\\u00e\"", "\"\\uDBFF\\uE000\"", "\"\\uDBFF\\n\"", "\"\\u000g\"", "\"\\\"",
	};
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++)
		check_against_jansson(texts[i], strlen(texts[i]));
	/* a raw NUL, inside a string and out */
	check_against_jansson("\"a\0b\"", 5);
	check_against_jansson("[1]\0", 4);
}

/* A string of n plain bytes with one byte b at position p: the scan stops
 * there whatever n and p (both sides of every 16- and 32-byte step). */
static void special_byte_at_every_position(void **state)
{
	(void)state;
	static const unsigned char specials[] = { '"', '\\', 0x00, 0x01, 0x1f, 0x80, 0xc3, 0xff };
	char text[80];

	for (size_t n = 1; n <= 70; n++)
		for (size_t p = 0; p < n; p++)
			for (size_t s = 0; s < sizeof(specials); s++) {
				text[0] = '"';
				memset(text + 1, 'a', n);
				text[1 + p] = (char)specials[s];
				text[1 + n] = '"';
				struct toks k;
				enum fg_jt_status st = tokenize(text, n + 2, 0, &k);
				/* a quote ends the string early (garbage after it), a
				 * backslash escapes 'a' or the closing quote, the rest
				 * are no bytes of a string or no whole character */
				assert_int_equal(st, FG_JT_ERROR);
				/* plain: accepted, one string of n bytes */
				text[1 + p] = 'b';
				assert_int_equal(tokenize(text, n + 2, 0, &k), FG_JT_DONE);
				assert_int_equal(k.n, 1);
				assert_int_equal(k.t[0].decoded_len, n);
				assert_int_equal(k.t[0].end, n + 2);
			}
	/* a valid three-byte character at every position, and one cut short */
	for (size_t n = 3; n <= 70; n++)
		for (size_t p = 0; p + 2 < n; p++) {
			text[0] = '"';
			memset(text + 1, 'a', n);
			memcpy(text + 1 + p, "\xe4\xbd\xa0", 3);
			text[1 + n] = '"';
			struct toks k;
			assert_int_equal(tokenize(text, n + 2, 0, &k), FG_JT_DONE);
			assert_int_equal(k.t[0].decoded_len, n);
			text[3 + p] = 'a';
			assert_int_equal(tokenize(text, n + 2, 0, &k), FG_JT_ERROR);
		}
	/* a valid two-byte character at every position */
	for (size_t n = 2; n <= 70; n++)
		for (size_t p = 0; p + 1 < n; p++) {
			text[0] = '"';
			memset(text + 1, 'a', n);
			text[1 + p] = (char)0xc3, text[2 + p] = (char)0xa9;
			text[1 + n] = '"';
			struct toks k;
			assert_int_equal(tokenize(text, n + 2, 0, &k), FG_JT_DONE);
			assert_int_equal(k.t[0].decoded_len, n);
			same_in_every_cutting(text, n + 2);
		}
}

/* Nesting to the tokenizer's limit and one past it. */
static void depth_limit(void **state)
{
	(void)state;
	size_t d = FG_JT_MAX_DEPTH;
	char *t = malloc(2 * d + 2);
	struct toks *k = malloc(sizeof(*k));

	memset(t, '[', d);
	memset(t + d, ']', d);
	assert_int_equal(tokenize(t, 2 * d, 0, k), FG_JT_DONE);
	memset(t, '[', d + 1);
	memset(t + d + 1, ']', d + 1);
	assert_int_equal(tokenize(t, 2 * d + 2, 0, k), FG_JT_ERROR);
	free(t);
	free(k);
}

/* A callback that says no stops the tokenizer, for good. */
static int stop_at_second(void *ctx, const char *text, const struct fg_jt_token *t)
{
	(void)text, (void)t;
	return ++*(int *)ctx < 2;
}

static void callback_stops(void **state)
{
	(void)state;
	struct fg_jt j;
	int seen = 0;

	fg_jt_init(&j);
	assert_int_equal(fg_jt_feed(&j, "[1,2,3]", 7, stop_at_second, &seen), FG_JT_STOPPED);
	assert_int_equal(seen, 2);
	assert_int_equal(fg_jt_finish(&j, "[1,2,3]", 7, stop_at_second, &seen), FG_JT_ERROR);
	assert_int_equal(seen, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(tokens_of_a_body),
		cmocka_unit_test(verdicts_as_jansson),
		cmocka_unit_test(special_byte_at_every_position),
		cmocka_unit_test(depth_limit),
		cmocka_unit_test(callback_stops),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
