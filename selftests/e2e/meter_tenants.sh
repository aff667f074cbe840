#!/usr/bin/env bash
# meter_tenants.sh — no tenant moves another's estimate. Tenant alpha feeds
# the engine text that its tokenizer compresses 16:1 (a repeated letter),
# request after request, to drive the chars/token estimate up; then it and
# beta each send a 400,000-character prompt (100,007 tokens by the engine's
# count) under a 32,768-token max_context and a 40,000-token KV cap. Beta's
# ratio, admissions, refusal and bill are the same before and after; alpha's
# own ratio moved but stays within twice the prior, and its own huge prompt
# is refused all the same (limits are judged at the prior's count, then the
# engine's). Engine: fg-fake-engine (its tokenizer compresses repeats).
source "$(dirname "$0")/meter_env.inc"

px_netns mtenants 34
mt_policy "message_tokens: 4, reply_tokens: 3"
mt_start_fake
px_start_agent

text=$(yes 'the quick brown fox jumps over a lazy dog' | head -c 400000 | tr '\n' ' ')
printf '{"messages":[{"role":"user","content":"%s"}],"max_tokens":10}' "$text" >"$PX_TMP/huge.json"
printf '{"messages":[{"role":"user","content":"%s"}],"max_tokens":10,"stream":true}' "$text" >"$PX_TMP/huge_stream.json"
printf '{"messages":[{"role":"user","content":"%s"}],"max_tokens":10}' "$(head -c 8000 <<<"$text")" >"$PX_TMP/normal.json"
repeat=$(head -c 16000 /dev/zero | tr '\0' 'a')
printf '{"messages":[{"role":"user","content":"%s"}],"max_tokens":1}' "$repeat" >"$PX_TMP/poison.json"

send() { # KEY BODYFILE — "STATUS BILLED-DELTA ERROR-MESSAGE"
	local tenant=$1 f=$2 key b0 b1 code
	key=$([ "$tenant" = alpha ] && echo $PX_KEY_A || echo $PX_KEY_B)
	b0=$(billed "$tenant")
	code=$(pc "$PX_URL/v1/chat/completions" -H "Authorization: Bearer $key" \
		--data-binary @"$f" -o "$PX_TMP/r" -w '%{http_code}')
	b1=$(billed "$tenant")
	echo "$code $(awk -v a="$b0" -v b="$b1" 'BEGIN { printf "%.3f", b - a }') $(jq -r '.error.message // ""' "$PX_TMP/r" 2>/dev/null || true)"
}
cpt() { tenant_field "$1" 'chars_per_token[""] // "prior"'; } # requests name no model

# before: beta's view of the world
beta_normal_1=$(send beta "$PX_TMP/normal.json")
beta_huge_1=$(send beta "$PX_TMP/huge.json")
beta_cpt_1=$(cpt beta)
beta_exact_1=$(tenant_field beta exact_counts)
expect_eq "beta: an 8,000-char request is served" "${beta_normal_1%% *}" 200
expect_eq "beta: the 100K-token prompt is refused (400)" "${beta_huge_1%% *}" 400

# alpha poisons: 40 requests whose 16,000 chars are 1,000 tokens
for i in $(seq 40); do
	pc "$PX_URL/v1/chat/completions" -H "Authorization: Bearer $PX_KEY_A" \
		--data-binary @"$PX_TMP/poison.json" -o /dev/null
done
a=$(cpt alpha)
echo "# alpha's chars/token after 40 compressible prompts: $a (prior 4; beta: $(cpt beta))"
check "alpha's own ratio moved up ($a)" awk -v a="$a" 'BEGIN { exit !(a > 7) }'
check "  but no further than twice the prior" awk -v a="$a" 'BEGIN { exit !(a <= 8.0001) }'

# after: beta sees the same
beta_normal_2=$(send beta "$PX_TMP/normal.json")
beta_huge_2=$(send beta "$PX_TMP/huge.json")
expect_eq "beta's ratio did not move" "$(cpt beta)" "$beta_cpt_1"
expect_eq "beta's 8,000-char request: same status, same bill" "${beta_normal_2% *}" "${beta_normal_1% *}"
expect_eq "beta's 100K prompt: refused the same way, same message" "$beta_huge_2" "$beta_huge_1"
expect_eq "beta's exact counts: one more for the second huge prompt, as before" \
	"$(tenant_field beta exact_counts)" $((beta_exact_1 + 1))

# alpha cannot use its own ratio to slip the huge prompt in
r=$(send alpha "$PX_TMP/huge.json")
# (refused on the engine's count, billed that count as a /tokenize of
# 100,007 tokens is: the same as beta's refusal)
expect_eq "alpha's 100K prompt, not streamed: refused (400), billed its count as beta is" "$r" "$beta_huge_1"
expect_eq "  the count's price: 100,007 tokens at the prefix-cache weight" "$(cut -d' ' -f2 <<<"$r")" 10000.700
r=$(send alpha "$PX_TMP/huge_stream.json")
expect_eq "alpha's 100K prompt, streamed: refused before the engine (400)" "${r%% *}" 400
expect_eq "neither huge prompt reached the engine's chat endpoint" \
	"$(grep '^POST /v1/chat/completions ' "$PX_TMP/engine.log" | awk 'length($0) > 100000' | wc -l)" 0
# alpha's 8,000 chars are priced cheaper at its own ratio, billed the same
b=$(send alpha "$PX_TMP/normal.json")
expect_eq "alpha's 8,000-char request billed what the engine counted, as beta's" "${b% *}" "${beta_normal_1% *}"
check "no reservation left behind" no_leaked_reservations
px_stop_agent_clean
