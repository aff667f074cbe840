#!/usr/bin/env bash
# proxy_quota.sh — the token bucket seen from a client: 429 with a truthful
# Retry-After / retry-after-ms once the burst is spent (and success right
# after it), refusals that cost nothing, a request that can never fit
# answered 4xx with x-should-retry: false, and settlement that bills exactly
# what the engine reports (refunding the unused reservation).
source "$(dirname "$0")/proxy_env.inc"

px_netns quota 12
# beta: 20 units/s, 10 s of burst = a 200-unit bucket
PX_RATE_B=20 PX_BURST_S=10 px_policy
px_start_sim --speedup 0 --output-len uniform --enable-prompt-tokens-details
px_start_agent

ids=$(seq -s, 1 100)
# 100 prompt tokens (as token ids: counted exactly) + 10 output = 100 + 9
# decode steps at ~105 tokens of context (1.63 units each) = ~115 units
body="{\"prompt\":[$ids],\"max_tokens\":10}"
completion() { # KEY BODY [CURL ARGS]
	pc "$PX_URL/v1/completions" -H "Authorization: Bearer $1" -H 'Content-Type: application/json' \
		-d "$2" "${@:3}"
}
cost=$(px_price 100 10)
check "the cost model prices it at ~115 units ($cost)" awk -v c="$cost" 'BEGIN { exit !(c > 114.5 && c < 115) }'

code=$(completion $PX_KEY_B "$body" -o /dev/null -w '%{http_code}')
expect_eq "first request fits the burst" "$code" 200

completion $PX_KEY_B "$body" -D "$PX_TMP/h429" -o "$PX_TMP/b429" -w '%{http_code}' >"$PX_TMP/c429"
level=$(tenant_field beta bucket_units)
expect_eq "burst spent: 429" "$(cat "$PX_TMP/c429")" 429
ra=$(awk 'tolower($1) == "retry-after:" { print $2 + 0 }' "$PX_TMP/h429")
ms=$(awk 'tolower($1) == "retry-after-ms:" { print $2 + 0 }' "$PX_TMP/h429")
expect_eq "429: OpenAI error shape" "$(jq -r .error.code "$PX_TMP/b429")" rate_limit_exceeded
check "429: retry-after-ms present and positive" test "${ms:-0}" -gt 0
expect_eq "429: Retry-After is retry-after-ms rounded up to whole seconds" "$ra" \
	"$(( (ms + 999) / 1000 ))"
# truthful: the level then, plus the refill over the announced wait, is the
# price, stretched by at most FG_RETRY_SPREAD (10%) of the wait so that a
# herd refused together does not return together
got=$(awk -v l="$level" -v ms="$ms" 'BEGIN { printf "%.1f", l + 20 * ms / 1000 }')
check "429: wait = refill time for this request's cost, + at most 10% (level $level + 20/s x ${ms}ms = $got ~ $cost)" \
	awk -v g="$got" -v c="$cost" -v l="$level" 'BEGIN { exit !(g > c - 3 && g < c + 0.1 * (c - l) + 3) }'

# half the wait is too early; the announced wait is enough (refused
# requests in between take nothing, and their turns come after this one's)
sleep "$(awk -v ms="$ms" 'BEGIN { print ms / 2000 }')"
code=$(completion $PX_KEY_B "$body" -o /dev/null -w '%{http_code}')
expect_eq "retrying after half the announced wait: still 429" "$code" 429
sleep "$(awk -v ms="$ms" 'BEGIN { print ms / 2000 + 0.05 }')"
code=$(completion $PX_KEY_B "$body" -o /dev/null -w '%{http_code}')
expect_eq "retrying after the announced wait: 200" "$code" 200

# refusals cost nothing
before=$(tenant_field beta bucket_units)
for i in 1 2 3 4 5; do completion $PX_KEY_B "$body" -o /dev/null; done
after=$(tenant_field beta bucket_units)
check "five more 429s took nothing from the bucket ($before -> $after)" float_le "$before" "$after"
expect_eq "rejections counted" "$(tenant_field beta rejected)" 7

# never fits: 100 + 99 decode steps at ~150 tokens (1.68 units) = 266 units > the 200-unit bucket
completion $PX_KEY_B "{\"prompt\":[$ids],\"max_tokens\":100}" -D "$PX_TMP/hnf" -o "$PX_TMP/bnf" \
	-w '%{http_code}' >"$PX_TMP/cnf"
expect_eq "never fits: 400" "$(cat "$PX_TMP/cnf")" 400
check "never fits: x-should-retry: false" grep -qi '^x-should-retry: false' "$PX_TMP/hnf"
check "never fits: no Retry-After" bash -c "! grep -qi '^retry-after' $PX_TMP/hnf"
check "never fits: the message says why" grep -q 'can never be admitted.*at most 200 units' "$PX_TMP/bnf"

# settlement bills usage exactly; the unused reservation comes back
: >"$PX_TMP/usage"
for i in $(seq 1 12); do
	pc "$PX_URL/v1/chat/completions" -H "Authorization: Bearer $PX_KEY_A" \
		-d "{\"messages\":[{\"role\":\"user\",\"content\":\"question number $i about the weather today\"}],\"max_tokens\":40}" |
		jq -c '.usage' >>"$PX_TMP/usage"
done
for i in 1 2 3; do # streams: usage comes from the (hidden) usage chunk
	pc "$PX_URL/v1/chat/completions" -H "Authorization: Bearer $PX_KEY_A" \
		-d "{\"messages\":[{\"role\":\"user\",\"content\":\"stream $i\"}],\"max_tokens\":40,\"stream\":true,\"stream_options\":{\"include_usage\":true}}" |
		sed -n 's/^data: //p' | grep '"usage":{' | jq -c '.usage' >>"$PX_TMP/usage"
done
want=$(jq -r '"\(.prompt_tokens) \(.completion_tokens) \(.prompt_tokens_details.cached_tokens // 0)"' "$PX_TMP/usage" |
	while read -r p o ca; do px_price "$p" "$o" 1 "$ca"; done | awk '{ s += $1 } END { printf "%.3f", s }')
billed=$(metric 'fairgate_tenant_units_total{tenant="alpha"}')
check "billed = sum over usage of each request's price by the cost model ($billed ~ $want)" \
	awk -v a="$billed" -v b="$want" 'BEGIN { d = a - b; exit !(d < 0.01 && d > -0.01) }'
outs=$(jq -r .completion_tokens "$PX_TMP/usage" | sort -n | head -1)
check "engine returned fewer tokens than reserved (min completion $outs < 40)" test "$outs" -lt 40
check "the difference was refunded" float_le 1 "$(metric 'fairgate_tenant_refunded_units_total{tenant="alpha"}')"
check "no reservation left behind" no_leaked_reservations
px_stop_agent_clean
