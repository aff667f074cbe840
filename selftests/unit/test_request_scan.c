/* test_request_scan.c — the body scanner fed read by read
 * (fg_request_scan_*) against the one-shot fg_request_parse, on every body
 * of the request fuzzer's corpus under every API: cut at every byte into
 * two reads, one byte per read, and random cuttings, the same verdict,
 * message, parameter and fg_req_info (selftests/common/request_scan_diff.h;
 * the bodies of test_proxy_http's and test_metering's tables go through the
 * same check). Plus what only the pieces can show: a scan dropped
 * unfinished frees what it holds, and a body cut inside a multi-byte UTF-8
 * character or an escape is still read as one. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "agent/http/http_request.h"
#include "selftests/common/request_scan_diff.h"

static const enum fg_api apis[] = { FG_API_CHAT, FG_API_COMPLETIONS, FG_API_EMBEDDINGS,
				    FG_API_RESPONSES, FG_API_TOKENIZE, FG_API_DETOKENIZE,
				    FG_API_PASSTHROUGH };

static void check_all_apis(const char *name, const char *body, size_t len)
{
	char why[1024];

	for (size_t a = 0; a < sizeof(apis) / sizeof(apis[0]); a++)
		if (!scan_diff(apis[a], body, len, 2048, 16, len * 31 + a, why, sizeof(why)))
			fail_msg("%s (api %d): %s", name, (int)apis[a], why);
}

static void fuzz_corpus_in_pieces(void **state)
{
	(void)state;
	const char *root = getenv("FG_ROOT");
	char dir[4096], path[8192];
	snprintf(dir, sizeof(dir), "%s/selftests/fuzz/corpus/request_json", root ? root : ".");
	DIR *d = opendir(dir);
	assert_non_null(d);
	int files = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		FILE *f = fopen(path, "rb");
		assert_non_null(f);
		char *buf = malloc(1 << 20);
		size_t n = fread(buf, 1, 1 << 20, f);
		fclose(f);
		/* the fuzzer's first two bytes pick the API and rewrite: the body follows */
		if (n >= 2)
			check_all_apis(e->d_name, buf + 2, n - 2);
		free(buf);
		files++;
	}
	closedir(d);
	assert_true(files >= 10);
}

/* Bodies whose every cut lands somewhere a streaming reader can go wrong. */
static void awkward_cuts(void **state)
{
	(void)state;
	static const char *const bodies[] = {
		"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80\"}]}",
		"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"a\\u00e9\\ud83d\\ude00\\\"q\\\\\"}]}",
		"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"lone \\ud83d x\"}]}",
		"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"nul \\u0000\"}]}",
		"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"bad \xc3\x28\"}]}",
		"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"cut \xe2\x82\"}]}",
		"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\f\"n\":2}",
		"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]\v,\"n\":2,\f}",
		"{\"model\":\"m\",\"max_tokens\":12345678901234567890123,\"prompt\":\"x\"}",
		"{\"model\":\"m\",\"prompt\":[1,2,3,[4,5]],\"max_tokens\":1e400}",
		"{\"model\":\"m\",\"prompt\":\"x\",\"stream\":true,\"stream_options\":{\"include_usage\":false,\"x\":1,\"continuous_usage_stats\":true},\"cache_salt\":\"c\",\"priority\":3,\"max_tokens\":7}",
		"{\"model\":\"m\",\"prompt\":\"x\",\"model\":\"n\"}",
		"{\"model\":\"m\",\"prompt\":\"x\"} {}",
		"{\"model\":\"m\",\"prompt\":\"x\"}   \r\n",
		"{\"model\":\"m\",\"prompt\":\"x\"",
		"{\"model\":\"m\",\"prompt\":\"x\"}tru",
		"[1,2]",
		"123",
		"",
		"   ",
		/* what the tokenizer decodes itself: escaped keys (a duplicate
		 * by escape), an escaped model and part type, escaped texts */
		"{\"model\":\"m\",\"prompt\":\"x\",\"\\u006dodel\":\"n\"}",
		"{\"mod\\u0065l\":\"m\\u00e9\\/x\",\"pr\\u006fmpt\":\"\\ud83d\\ude00\\n\",\"max_tokens\":3}",
		"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\\u005furl\",\"image_url\":{\"url\":\"d\\u0061ta\"}},{\"t\\u0079pe\":\"text\",\"text\":\"a\\tb\\u20ac\"}]}]}",
		"{\"a\\u0000\":1,\"prompt\":\"x\"}",
		"{\"prompt\":\"\\uDC00\"}",
		"{\"prompt\":\"\\uD800\\u0041\"}",
		"{\"prompt\":\"\\q\"}",
		/* numbers, literals and whitespace the tokenizer must end right */
		"{\"prompt\":\"x\",\"max_tokens\":-0,\"n\":1.0,\"best_of\":1e0,\"stream\":false}",
		"{\"prompt\":\"x\",\"max_tokens\":01}",
		"{\"prompt\":\"x\",\"max_tokens\":1.}",
		"{\"prompt\":\"x\",\"max_tokens\":-}",
		"{\"prompt\":\"x\",\"max_tokens\":2e+}",
		"{\"prompt\":\"x\",\"stream\":tru}",
		"{\"prompt\":\"x\",\"stream\":nulll}",
		" \t\r\n{ \"prompt\" :\n\"x\" , \"max_tokens\"\t:\r7 }\n",
		"{\"prompt\":\"x\",}",
		"{\"prompt\":\"x\"]",
		"{\"prompt\":[\"a\",\"b\",[1,2],[3]],\"max_tokens\":4}",
		/* raw bytes: an overlong, a surrogate, past U+10FFFF, a control byte */
		"{\"prompt\":\"\xc0\x80\"}",
		"{\"prompt\":\"\xed\xa0\x80\"}",
		"{\"prompt\":\"\xf4\x90\x80\x80\"}",
		"{\"prompt\":\"a\x01\"}",
		"{\"prompt\":\"\x7f\xef\xbf\xbf\xf4\x8f\xbf\xbf\"}",
		"\xef\xbb\xbf{\"prompt\":\"x\"}",
	};
	for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++)
		check_all_apis(bodies[i], bodies[i], strlen(bodies[i]));
}

/* A large body in the proxy's read sizes: the pieces agree at scale too. */
static void large_body_in_reads(void **state)
{
	(void)state;
	size_t len = 300000;
	char *b = malloc(len);
	const char *head = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"";
	const char *tail = "\"}],\"max_tokens\":9}";
	size_t hl = strlen(head), tl = strlen(tail);
	memcpy(b, head, hl);
	/* multi-byte characters and escapes all along, so reads cut through them */
	static const char seg[] = "h\xc3\xa9llo w\xc3\xb6rld \xe2\x82\xac\\n\\u00e9 \xf0\x9f\x98\x80 ";
	size_t at = hl;
	while (at + sizeof(seg) - 1 <= len - tl) {
		memcpy(b + at, seg, sizeof(seg) - 1);
		at += sizeof(seg) - 1;
	}
	memset(b + at, ' ', len - tl - at);
	memcpy(b + len - tl, tail, tl);
	struct scan_ref ref;
	char why[1024];
	scan_ref_of(FG_API_CHAT, b, len, &ref);
	if (ref.rc)
		fail_msg("the body is refused: %s", ref.msg);
	size_t cuts[64], n = 0;
	for (size_t c = 65536 - 3; c < len; c += 65536)
		cuts[n++] = c;
	if (!scan_diff_pieces(FG_API_CHAT, b, len, cuts, n, &ref, why, sizeof(why)))
		fail_msg("64 KiB reads: %s", why);
	free(b);
}

/* Nesting at the reader's limit (2048) and past it, in reads. */
static void deep_nesting(void **state)
{
	(void)state;
	for (size_t depth = 2046; depth <= 2050; depth++) {
		const char *head = "{\"prompt\":\"x\",\"other\":", *tail = "}";
		size_t hl = strlen(head), len = hl + 2 * depth + 1;
		char *b = malloc(len + 1), why[1024];
		memcpy(b, head, hl);
		memset(b + hl, '[', depth);
		memset(b + hl + depth, ']', depth);
		memcpy(b + hl + 2 * depth, tail, 1);
		if (!scan_diff(FG_API_COMPLETIONS, b, len, 0, 4, depth, why, sizeof(why)))
			fail_msg("depth %zu: %s", depth, why);
		free(b);
	}
}

static void dropped_unfinished(void **state)
{
	(void)state;
	const char *b = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"abc";
	struct fg_req_scan *s = fg_request_scan_new(FG_API_CHAT);
	assert_non_null(s);
	assert_int_equal(fg_request_scan_api(s), FG_API_CHAT);
	fg_request_scan_feed(s, b, strlen(b));
	fg_request_scan_free(s); /* the client went away: ASan checks nothing leaks */
	fg_request_scan_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(fuzz_corpus_in_pieces),
		cmocka_unit_test(awkward_cuts),
		cmocka_unit_test(large_body_in_reads),
		cmocka_unit_test(deep_nesting),
		cmocka_unit_test(dropped_unfinished),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
