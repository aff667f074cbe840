/* fuzz_sse.c — libFuzzer target: the agent's relay of a streamed answer
 * (agent/http/http_sse.c: chat/completions chunks, or the responses API's
 * events) fed arbitrary engine bytes, and the settlement that follows from
 * the usage it reads.
 *
 * The first byte picks the event kind, whether the forced usage chunk is
 * hidden and the forced per-chunk usage cut out, whether the first
 * reported prompt stops the relay (as a prompt over a limit does), and how
 * the stream is cut into reads. Invariants: cutting the stream differently
 * changes nothing (same bytes out, same usage, same event count, same
 * [DONE], same stop); with nothing hidden or cut and no stop the client
 * gets the engine's bytes exactly; hiding and cutting only ever remove
 * bytes; usage read from the engine is finite and non-negative; and the
 * units billed from it are finite, non-negative and never more than the
 * reservation's output allows. */
#include <math.h>
#include <string.h>

#include "agent/http/http_sse.h"
#include "policy/cost_model.h"
#include "policy/policy.h"
#include "policy/pricing.h"
#include "selftests/fuzz/fuzz_common.h"

static struct fg_cost_model cm;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static struct fg_policy p;

	(void)argc;
	(void)argv;
	fg_policy_defaults(&p);
	fg_cost_model_init(&cm, &p.replica);
	return 0;
}

static bool stop_above_100(void *ctx, double prompt_tokens)
{
	(void)ctx;
	return !(prompt_tokens > 100);
}

static void relay(struct fg_sse *s, uint8_t opt, const uint8_t *d, size_t n, uint32_t seed,
		  size_t max_chunk, struct fg_buf *out)
{
	size_t off = 0;

	fg_sse_init(s, opt & 4 ? FG_SSE_RESPONSES : FG_SSE_CHUNKS, opt & 1, opt & 2);
	if (opt & 8)
		s->on_prompt = stop_above_100;
	while (off < n) {
		size_t k = max_chunk ? fuzz_next_chunk(&seed, max_chunk) : n;
		if (k > n - off)
			k = n - off;
		FUZZ_CHECK(fg_sse_feed(s, (const char *)d + off, k, out) == 0, "feed failed");
		off += k;
	}
	FUZZ_CHECK(fg_sse_finish(s, out) == 0, "finish failed");
}

/* memcmp with a NULL pointer is undefined even for 0 bytes */
static bool same_bytes(const void *a, size_t alen, const void *b, size_t blen)
{
	return alen == blen && (!alen || !memcmp(a, b, alen));
}

static void check_usage(const struct fg_usage *u)
{
	FUZZ_CHECK(isfinite(u->prompt_tokens) && u->prompt_tokens >= 0, "prompt_tokens %g",
		   u->prompt_tokens);
	FUZZ_CHECK(isfinite(u->completion_tokens) && u->completion_tokens >= 0,
		   "completion_tokens %g", u->completion_tokens);
	FUZZ_CHECK(isfinite(u->cached_tokens) && u->cached_tokens >= 0, "cached_tokens %g",
		   u->cached_tokens);
	/* the agent learns chars/token from it as an integer count */
	FUZZ_CHECK(u->prompt_tokens < 18446744073709551616.0, "prompt_tokens %g overflows a count",
		   u->prompt_tokens);

	struct fg_price reserved = { .prompt_tokens = 100, .output_tokens = 256,
				     .prompt_ceiling = 1e9 };
	reserved.units = fg_request_units(&cm, 100, 0, 256);
	for (int mode = FG_METER_REPLICA_TIME; mode <= FG_METER_REQUESTS; mode++) {
		double billed = fg_settle_units(&cm, (enum fg_metering)mode, &reserved, u);
		FUZZ_CHECK(isfinite(billed) && billed >= 0, "billed %g units (mode %d)", billed, mode);
	}
	double billed = fg_settle_units(&cm, FG_METER_REPLICA_TIME, &reserved, u);
	double cap = fg_request_units(&cm, u->prompt_tokens, 0, 256);
	FUZZ_CHECK(billed <= cap * (1 + 1e-9), "billed %g beyond what was asked for (%g)", billed,
		   cap);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t opt = fuzz_take_byte(&data, &size);
	bool untouched = (opt & 4) || !(opt & 3);
	struct fg_sse whole, cut;
	struct fg_buf out_whole = { 0 }, out_cut = { 0 };

	relay(&whole, opt, data, size, 0, 0, &out_whole);
	relay(&cut, opt, data, size, opt | 0x100u, 1 + (opt >> 4), &out_cut);

	FUZZ_CHECK(same_bytes(fg_buf_head(&out_whole), fg_buf_used(&out_whole),
			      fg_buf_head(&out_cut), fg_buf_used(&out_cut)),
		   "output depends on how the stream was cut (%zu vs %zu bytes)",
		   fg_buf_used(&out_whole), fg_buf_used(&out_cut));
	FUZZ_CHECK(whole.have_usage == cut.have_usage && whole.saw_done == cut.saw_done &&
			   whole.content_events == cut.content_events && whole.stopped == cut.stopped &&
			   whole.prompt_reported == cut.prompt_reported,
		   "state depends on how the stream was cut");
	FUZZ_CHECK(!whole.stopped || (opt & 8), "stopped without a listener");
	if (whole.have_usage)
		FUZZ_CHECK(!memcmp(&whole.usage, &cut.usage, sizeof(whole.usage)),
			   "usage depends on how the stream was cut");
	if (untouched && !whole.stopped)
		FUZZ_CHECK(same_bytes(fg_buf_head(&out_whole), fg_buf_used(&out_whole), data, size),
			   "relay changed the engine's bytes");
	else
		FUZZ_CHECK(fg_buf_used(&out_whole) <= size, "hiding or cutting added bytes");
	if (whole.have_usage)
		check_usage(&whole.usage);

	fg_sse_free(&whole);
	fg_sse_free(&cut);
	fg_buf_free(&out_whole);
	fg_buf_free(&out_cut);
	return 0;
}
