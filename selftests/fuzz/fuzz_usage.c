/* fuzz_usage.c — libFuzzer target: the engine's usage object as settlement
 * reads it (fg_usage_parse, a yajl reader that builds no tree), checked
 * against the jansson reading it stands in for.
 *
 * The input is the bytes after `"usage":` in an engine's answer. Whenever
 * the yajl reader answers (1 = usage read, 0 = counts unusable) instead of
 * deferring (-1), jansson on the same bytes, read the way the proxy falls
 * back (first value only, wrapped as {"usage": v}, fg_usage_from_json), must
 * reach the same verdict and, for a usage read, the same three counts. So
 * the fast path never bills differently from the slow one. */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "agent/http/http_sse.h"
#include "selftests/fuzz/fuzz_common.h"

static bool same_count(double a, double b)
{
	return a == b || (isnan(a) && isnan(b));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fg_usage fast = { -1, -1, -1 }, slow = { -1, -1, -1 };
	int r = fg_usage_parse((const char *)data, size, &fast);

	FUZZ_CHECK(r >= -1 && r <= 1, "fg_usage_parse returned %d", r);
	if (r < 0)
		return 0;

	json_t *v = json_loadb((const char *)data, size, JSON_DISABLE_EOF_CHECK, NULL);
	FUZZ_CHECK(json_is_object(v), "the yajl reader answered %d where jansson reads no object", r);
	json_t *wrap = json_pack("{s:O}", "usage", v);
	FUZZ_CHECK(wrap, "out of memory");
	bool ok = fg_usage_from_json(wrap, &slow);
	json_decref(wrap);
	json_decref(v);

	FUZZ_CHECK(ok == (r == 1), "yajl reader says %d, jansson says %s", r, ok ? "usage" : "no usage");
	if (ok) {
		FUZZ_CHECK(same_count(fast.prompt_tokens, slow.prompt_tokens) &&
				   same_count(fast.completion_tokens, slow.completion_tokens) &&
				   same_count(fast.cached_tokens, slow.cached_tokens),
			   "counts differ: prompt %.17g/%.17g completion %.17g/%.17g cached %.17g/%.17g",
			   fast.prompt_tokens, slow.prompt_tokens, fast.completion_tokens,
			   slow.completion_tokens, fast.cached_tokens, slow.cached_tokens);
		FUZZ_CHECK(fast.prompt_tokens >= 0 && fast.completion_tokens >= 0 &&
				   fast.cached_tokens >= 0,
			   "a negative count was read");
	}
	return 0;
}
