#!/usr/bin/env bash
# meter_stream.sh — streams that cannot overrun a cap. fairgated asks
# fairgate-sim for stream_options.continuous_usage_stats, so the true prompt
# is known at the first chunk; here the policy's framing prior is too low
# (message_tokens: 0 against the engine's 4 a message), so the estimate of
# a 7,000-message conversation is ~3,500 tokens while the engine counts
# 35,003. Streamed, it is ended at its first chunk (upstream aborted, the
# engine stops generating), billed its prefill, and the client gets an
# OpenAI-shaped SSE error; the same for a KV cap broken by n x the true
# prompt. Not streamed, the engine's /tokenize counts it first and it is
# refused before it runs. The sim runs at real speed, so "stops generating"
# is visible in its counters.
source "$(dirname "$0")/meter_env.inc"

px_netns mstream 35
mt_policy "message_tokens: 0, reply_tokens: 0" "" "  timeouts: {tokenize_s: 5}"
px_start_sim --speedup 1
px_start_agent
K="Authorization: Bearer $PX_KEY_A"

conversation() { # MESSAGES EXTRA — MESSAGES x {"role":"user","content":"ab"}
	{
		printf '{"messages":['
		yes '{"role":"user","content":"ab"}' | head -n "$1" | paste -sd, -
		printf '],"max_tokens":200%s}' "${2:-}"
	} >"$PX_TMP/conv.json"
}
gen() { sim_metric 'vllm:generation_tokens_total'; }
post() {
	pc "$PX_URL/v1/chat/completions" -H "$K" -H 'Content-Type: application/json' \
		--data-binary @"$PX_TMP/conv.json" -o "$PX_TMP/r" -w '%{http_code}' "$@"
}

# a stream within the limits is relayed whole, its usage hidden
conversation 100 ',"stream":true'
expect_eq "100 messages, streamed: 200" "$(post)" 200
check "  relayed to [DONE], no usage shown" bash -c "grep -q 'data: \[DONE\]' $PX_TMP/r && ! grep -q usage $PX_TMP/r"
expect_eq "  not cut off" "$(tenant_field alpha cut_off)" 0

# 7,000 messages, streamed: 35,003 tokens by the engine's count, ended at the first chunk
conversation 7000 ',"stream":true'
g0=$(gen) b0=$(billed alpha)
start=$(date +%s%N)
expect_eq "7,000 messages, streamed: 200 (the stream had started)" "$(post)" 200
ms=$(( ($(date +%s%N) - start) / 1000000 ))
ev=$(sed -n 's/^data: //p' "$PX_TMP/r" | head -1)
expect_eq "  the client is told why, in OpenAI's shape" \
	"$(jq -r '.error.type + " " + .error.code + " " + .error.param' <<<"$ev")" \
	"invalid_request_error context_length_exceeded messages"
check "  with the engine's count: $(jq -r .error.message <<<"$ev")" \
	bash -c "jq -r .error.message <<<'$ev' | grep -q '35003 tokens as the engine counts it'"
check "  then [DONE], and no content at all" \
	bash -c "test \"\$(grep -c '^data: ' $PX_TMP/r)\" = 2 && tail -c 20 $PX_TMP/r | grep -q 'data: \[DONE\]'"
sleep 1
g1=$(gen) b1=$(billed alpha)
check "  the engine stopped generating (tokens generated: $((g1 - g0)) of 200)" test $((g1 - g0)) -le 2
check "  billed its prefill (35,003 prompt tokens) and no output ($b0 -> $b1)" \
	near "$(awk -v a="$b0" -v b="$b1" 'BEGIN { print b - a }')" "$(units 35003 0 0)"
echo "# ended ${ms} ms after it was sent (the engine's prefill of 35,003 tokens at real speed)"
expect_eq "  counted: cut_off, context_exceeded" \
	"$(tenant_field alpha cut_off) $(tenant_field alpha 'outcomes.context_exceeded')" "1 1"
expect_eq "  the engine has nothing running" "$(sim_metric 'vllm:num_requests_running')" 0

# n = 2 x 20,003 true tokens under a 40,000-token KV cap: ended the same way
conversation 4000 ',"n":2,"stream":true'
expect_eq "4,000 messages x n = 2, streamed: 200" "$(post)" 200
ev=$(sed -n 's/^data: //p' "$PX_TMP/r" | head -1)
expect_eq "  ended for the KV cap" "$(jq -r .error.code <<<"$ev")" kv_cache_cap_exceeded
expect_eq "  counted" "$(tenant_field alpha 'outcomes.kv_never')" 1

# not streamed: the engine's /tokenize counts it first, and it never runs
conversation 7000
g0=$(gen)
n0=$(sim_metric 'vllm:request_success_total')
expect_eq "7,000 messages, not streamed: 400 before the engine" "$(post) $(jq -r .error.code "$PX_TMP/r")" \
	"400 context_length_exceeded"
expect_eq "  the engine ran nothing" "$(sim_metric 'vllm:request_success_total')/$(( $(gen) - g0 ))" "$n0/0"
expect_eq "  decided on fairgate-sim's /tokenize count" "$(tenant_field alpha exact_counts)" 1
# /tokenize against fairgate-sim: the added latency, over 10 calls
for i in $(seq 10); do post >/dev/null; done
read -r sum count < <(ip netns exec "$PX_SNS" curl -s http://127.0.0.1:9464/metrics |
	awk '$1 == "fairgate_tokenize_seconds_sum" { s = $2 } $1 == "fairgate_tokenize_seconds_count" { c = $2 } END { print s, c }')
echo "# fairgate-sim's /tokenize of a 7,000-message conversation (210 KB): $(awk -v s="$sum" -v c="$count" 'BEGIN { printf "%.2f", 1000 * s / c }') ms mean over $count calls (ASan build)"
check "no reservation left behind" no_leaked_reservations
px_stop_agent_clean
