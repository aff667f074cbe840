#!/usr/bin/env bash
# meter_exact.sh — exact prompt counts where they decide something: a
# request whose estimate lands near a limit that refuses it (here the
# tier's 32,768-token max_context) is counted by the engine's own POST
# /tokenize before admission; the common small request never is. Text the
# engine tokenizes densely (digits, a token each) is refused before it
# reaches the engine when not streamed (billed the count, as its own
# /tokenize would be: the engine did that work), and cut off at its first
# chunk when streamed (billed its prefill, the client told why in an SSE
# error event).
# A slow or failing /tokenize, a client that leaves while its prompt is
# counted, and a reload meanwhile lose nothing. The added latency is
# measured and printed. Engine: fg-fake-engine (fairgate-sim's tokenizer
# is 4 bytes a token whatever the text).
source "$(dirname "$0")/meter_env.inc"

px_netns mexact 33
PX_RATE_B=2.25 # a 135-unit bucket: a 107-token request (~122 units, its 10 outputs priced by context) barely fits it
mt_policy "message_tokens: 4, reply_tokens: 3" "" "  timeouts: {tokenize_s: 0.5}"
mt_start_fake
px_start_agent
K="Authorization: Bearer $PX_KEY_A"

text=$(yes 'the quick brown fox jumps over a lazy dog' | head -c 40000 | tr '\n' ' ')
digits=$(seq -s '' 1 20000 | head -c 40000)
body() { printf '{"messages":[{"role":"user","content":"%s"}],"max_tokens":10%s}' "$1" "${2:-}" >"$3"; }
body "$text" "" "$PX_TMP/plain.json"          # ~10,000 tokens; its bytes could make 40,000
body "$digits" "" "$PX_TMP/dense.json"        # 40,007 tokens
body "$digits" ',"stream":true' "$PX_TMP/dense_stream.json"
tok() { metric "fairgate_tokenize_requests_total{outcome=\"$1\"}"; }
post() { # BODYFILE [CURL ARGS] — the status; the answer in $PX_TMP/r
	local f=$1; shift
	pc "$PX_URL/v1/chat/completions" -H "$K" -H 'Content-Type: application/json' \
		--data-binary @"$f" -o "$PX_TMP/r" -w '%{http_code}' "$@"
}

# the common small request: no round trip
for i in 1 2 3 4 5; do
	chat $PX_KEY_A "{\"messages\":[{\"role\":\"user\",\"content\":\"question $i about the weather\"}],\"max_tokens\":8}" -o /dev/null
done
expect_eq "five small requests: no /tokenize call" "$(tok ok)/$(engine_saw '^POST /tokenize ')" "0/0"

# near the limit, counted: plain text fits, and goes
expect_eq "40,000 chars of plain text: 200" "$(post "$PX_TMP/plain.json")" 200
expect_eq "  counted by the engine first" "$(engine_saw '^POST /tokenize ')/$(tok ok)" "1/1"
expect_eq "  decided on the exact count" "$(tenant_field alpha exact_counts)" 1
check "  the /tokenize body is the request's shape (messages, no output cap)" \
	bash -c "grep '^POST /tokenize ' $PX_TMP/engine.log | sed 's/^[^{]*//' | jq -e '.messages and (.max_tokens == null)' >/dev/null"
# dense text: 40,007 tokens by the engine's count, refused before it runs
n=$(engine_saw '^POST /v1/chat/completions ')
b0=$(billed alpha)
expect_eq "40,000 digits, not streamed: 400" "$(post "$PX_TMP/dense.json")" 400
expect_eq "  context_length_exceeded with the engine's count" \
	"$(jq -r .error.code "$PX_TMP/r") $(jq -r .error.message "$PX_TMP/r" | grep -o 'needs [0-9]* tokens')" \
	"context_length_exceeded needs 40017 tokens"
expect_eq "  it never reached the engine" "$(engine_saw '^POST /v1/chat/completions ')" "$n"
b1=$(billed alpha)
check "  but the engine counted it: billed like a /tokenize of 40,007 tokens, at the cache price ($b0 -> $b1)" \
	near "$(awk -v a="$b0" -v b="$b1" 'BEGIN { print b - a }')" 4000.7
# streamed, it is not counted first (the estimate is far below the limit)
# and ends at its first chunk instead
b0=$(billed alpha)
expect_eq "40,000 digits, streamed: 200 (the stream starts)" "$(post "$PX_TMP/dense_stream.json")" 200
check "  its only event is an OpenAI-shaped error, then [DONE]" \
	bash -c "sed -n 's/^data: //p' $PX_TMP/r | head -1 | jq -e '.error.code == \"context_length_exceeded\" and (.error.message | test(\"40007 tokens as the engine counts it\"))' >/dev/null &&
		 test \"\$(grep -c '^data: ' $PX_TMP/r)\" = 2 && grep -q 'data: \[DONE\]' $PX_TMP/r"
b1=$(billed alpha)
check "  billed for what it used: the prefill ($b0 -> $b1)" near "$(awk -v a="$b0" -v b="$b1" 'BEGIN { print b - a }')" 40007
expect_eq "  counted as cut off" "$(tenant_field alpha cut_off)" 1

# a bucket that barely covers the price (beta: 135 units) asks too
body "$(head -c 400 <<<"$text")" "" "$PX_TMP/small.json"
t0=$(tok ok)
pc "$PX_URL/v1/chat/completions" -H "Authorization: Bearer $PX_KEY_B" --data-binary @"$PX_TMP/small.json" \
	-o "$PX_TMP/r" -w '%{http_code}' >"$PX_TMP/c"
expect_eq "a bucket barely covering the price: the engine counted the prompt" "$(tok ok)" $((t0 + 1))
expect_eq "  and the exact price (107 + 10 outputs) fits: 200" "$(cat "$PX_TMP/c")" 200

# the added latency, over 20 counted requests
for i in $(seq 20); do post "$PX_TMP/plain.json" >/dev/null; done
read -r sum count < <(ip netns exec "$PX_SNS" curl -s http://127.0.0.1:9464/metrics |
	awk '$1 == "fairgate_tokenize_seconds_sum" { s = $2 } $1 == "fairgate_tokenize_seconds_count" { c = $2 } END { print s, c }')
echo "# /tokenize round trip before admission: $(awk -v s="$sum" -v c="$count" 'BEGIN { printf "%.2f", 1000 * s / c }') ms mean over $count calls (fg-fake-engine on loopback, ASan build)"
check "  bounded by agent.timeouts.tokenize_s" awk -v s="$sum" -v c="$count" 'BEGIN { exit !(s / c < 0.5) }'

# a slow /tokenize: the time limit, then the conservative estimate decides
px_stop_sim; mt_start_fake --tokenize-delay-ms 3000
start=$(date +%s%N)
expect_eq "slow /tokenize (3 s, limit 0.5 s): served on the estimate" "$(post "$PX_TMP/plain.json")" 200
ms=$(( ($(date +%s%N) - start) / 1000000 ))
check "  after the 0.5 s limit, not the engine's 3 s (${ms} ms)" test "$ms" -lt 2500
expect_eq "  counted as a timeout" "$(tok timeout)" 1
# (a known gap, shown: on the estimate, dense text that is not streamed
# passes the limit it would have broken; it is billed what the engine reports)
expect_eq "slow /tokenize: dense text goes on the estimate (known gap)" "$(post "$PX_TMP/dense.json")" 200
# a failing /tokenize: the same
px_stop_sim; mt_start_fake --tokenize-status 500
expect_eq "failing /tokenize: served on the estimate" "$(post "$PX_TMP/plain.json")" 200
expect_eq "  counted as failed" "$(tok failed)" 1
# the client leaves while its prompt is counted: nothing reserved, nothing sent
px_stop_sim; mt_start_fake --tokenize-delay-ms 3000
n=$(engine_saw '^POST /v1/chat/completions ')
post "$PX_TMP/plain.json" --max-time 0.3 >/dev/null 2>&1
sleep 0.5
check "client gone while counted: no reservation" no_leaked_reservations
expect_eq "  and its request never reached the engine" "$(engine_saw '^POST /v1/chat/completions ')" "$n"
# a reload while counted: the request goes on under the new policy; a
# tenant removed meanwhile is told so
post "$PX_TMP/plain.json" >"$PX_TMP/c1" &
c1=$!
pc "$PX_URL/v1/chat/completions" -H "Authorization: Bearer $PX_KEY_B" --data-binary @"$PX_TMP/plain.json" \
	-o "$PX_TMP/r2" -w '%{http_code}' >"$PX_TMP/c2" &
c2=$!
sleep 0.1
awk '/^  - name: beta/ { skip = 1 } /^agent:/ { skip = 0 } !skip' "$PX_TMP/policy.yaml" >"$PX_TMP/p2.yaml"
cp "$PX_TMP/p2.yaml" "$PX_TMP/policy.yaml"
apply_quietly() { pctl policy apply "$PX_TMP/policy.yaml" >/dev/null; }
check "reload while two prompts are counted" apply_quietly
wait $c1 $c2
expect_eq "  the surviving tenant's request: served" "$(cat "$PX_TMP/c1")" 200
expect_eq "  the removed tenant's: 403 tenant_removed" "$(cat "$PX_TMP/c2") $(jq -r .error.code "$PX_TMP/r2")" "403 tenant_removed"
check "no reservation left behind" no_leaked_reservations
px_stop_agent_clean
