/* fuzz_http_heads.c — libFuzzer target: the proxy's fast head readers
 * (fg_req_head_fast for client requests, fg_resp_head_fast for engine
 * responses) against http_parser, the library they stand in for on the
 * common head. The first byte picks which; the rest is the bytes read from
 * the socket. Invariant: a fast reader either declines and leaves nothing
 * behind, or http_parser reads the same head the same way (end, method,
 * target, status, every header byte for byte, Content-Length, keep-alive),
 * so taking the fast path can never make the proxy laxer or read a head
 * differently. */
#include "selftests/common/http_head_diff.h"
#include "selftests/fuzz/fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	bool request = fuzz_take_byte(&data, &size) & 1;
	const char *why;

	FUZZ_CHECK(head_diff((const char *)data, size, request, &why) >= 0,
		   "%s head: the fast reader and http_parser differ on %s",
		   request ? "request" : "response", why);
	return 0;
}
