/* fuzz_tokenize_answer.c — libFuzzer target: the engine's answer to the
 * proxy's POST /tokenize as admission reads it (fg_tokenize_answer in
 * agent/http/http_request.c, a yajl reader that stops once it has the count and
 * max_model_len), checked against jansson.
 *
 * Invariants: whenever jansson reads the whole input as one object (no
 * duplicate keys) whose "count" is a non-negative integer and whose
 * "max_model_len" is one too or absent (and it holds no NUL byte, which
 * jansson reads leniently), the reader answers 0 with the same
 * two numbers; whenever the reader answers 0, its count is a non-negative
 * integer that appears in the input after a "count" key; it never answers
 * anything but 0 or -1. */
#include <jansson.h>
#include <string.h>

#include "agent/http/http_request.h"
#include "selftests/fuzz/fuzz_common.h"

static bool count_of(const json_t *o, const char *key, json_int_t *v)
{
	const json_t *x = json_object_get(o, key);

	if (!json_is_integer(x) || json_integer_value(x) < 0)
		return false;
	*v = json_integer_value(x);
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t count = 7, max_len = 7;
	int r = fg_tokenize_answer((const char *)data, size, &count, &max_len);

	FUZZ_CHECK(r == 0 || r == -1, "answered %d", r);
	if (r == 0)
		FUZZ_CHECK(memmem(data, size, "count", 5), "a count read from an input without one");
	json_t *o = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
	json_int_t c, m = 0;
	if (json_is_object(o) && !memchr(data, 0, size) && count_of(o, "count", &c) &&
	    (!json_object_get(o, "max_model_len") || count_of(o, "max_model_len", &m))) {
		FUZZ_CHECK(r == 0, "jansson reads count %lld, the reader refused", (long long)c);
		FUZZ_CHECK(count == (uint64_t)c && max_len == (uint64_t)m,
			   "count %llu / %llu, jansson %lld / %lld", (unsigned long long)count,
			   (unsigned long long)max_len, (long long)c, (long long)m);
	}
	json_decref(o);
	return 0;
}
