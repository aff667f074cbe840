#!/usr/bin/env bash
# proxy_context_price.sh — output tokens billed by the context they decode
# against, through the real fairgated and fairgate-sim: two tenants with equal
# contracts send requests with equal outputs (200 tokens) against a 16,000- and
# a 500-token prompt. On the seed replica (by hand, t(c) = 54.843 us + c x
# 32.605 ns, one prompt token 35.649 us):
#   long:  199 decode steps from 16,001 to 16,199 tokens, t(16,100) = 579.78 us
#          = 16.2635 units: 3,236.44 output units, 19,236.44 per request
#   short: 199 steps from 501 to 699, t(600) = 74.406 us = 2.0872 units:
#          415.35 output units, 915.35 per request
# so the long tenant's output is billed 7.792x the short one's; flat (after a
# hot reload to agent.output_pricing: flat) both pay 200 x 3.0932 = 618.65.
# Also: n = 4 choices split the usage's summed completion, the reservation
# (what `fairgatectl tenant show` and the 429's Retry-After see) is the
# context price, and the fair queue ends charged what was billed.
source "$(dirname "$0")/proxy_env.inc"
need_root "context pricing"
bpffs_ready

px_netns ctxprice 27
PIN=/sys/fs/bpf/fgt-px-ctxprice-$$
on_exit "rm -rf $PIN"
# tight: 100 units/s, 300 s of burst = 30,000 units: one long request fits,
# two do not
policy() { # OUTPUT_PRICING
	cat >"$PX_TMP/policy.yaml" <<EOF
tiers:
  standard: {weight: 1, max_context: 32768, kv_cap_tokens: 131072, burst_s: 60, max_queue_s: 30, priority: 0}
  tight: {weight: 1, max_context: 32768, kv_cap_tokens: 131072, burst_s: 300, max_queue_s: 30, priority: 0}
tenants:
  - {name: longdoc, tier: standard, units_per_s: 100000, keys: ["sha256:$(px_hash $PX_KEY_A)"]}
  - {name: chat, tier: standard, units_per_s: 100000, keys: ["sha256:$(px_hash $PX_KEY_B)"]}
  - {name: tight, tier: tight, units_per_s: 100, keys: ["sha256:$(px_hash $PX_KEY_C)"]}
agent:
  listen: 0.0.0.0:8000
  engine: 127.0.0.1:8001
  metrics_listen: 127.0.0.1:9464
  salt_secret_file: $PX_TMP/salt.key
  output_pricing: $1
EOF
}
policy context
px_start_sim --speedup 0
# no interfaces: gate is not attached, but the maps are pinned and published,
# which is what `fairgatectl tenant show` reads
spawn "$PX_TMP/agent.log" nsenter --net=/run/netns/"$PX_SNS" "$FG_BUILD/fairgated" \
	--policy "$PX_TMP/policy.yaml" --ctl "$PX_TMP/ctl.sock" --pin-dir "$PIN" --cleanup
PX_AGENT_PID=$SPAWNED_PID
wait_port "$PX_SNS" 127.0.0.1 8000 10 || { tap_fail "fairgated starts" "$(tail -5 "$PX_TMP/agent.log")"; exit 1; }
export FAIRGATE_PIN_DIR=$PIN

# body FILE PROMPT_TOKENS FIRST_ID [N] — distinct token ids, so no prefix is cached
body() {
	printf '{"prompt":[%s],"max_tokens":200,"n":%s}' "$(seq -s, "$3" $(($3 + $2 - 1)))" "${4:-1}" >"$1"
}
post() { # KEY FILE [CURL ARGS...]
	local key=$1 file=$2; shift 2
	pc "$PX_URL/v1/completions" -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
		--data-binary @"$file" "$@"
}
units() { metric "fairgate_tenant_units_total{tenant=\"$1\"}"; }
out_units() { metric "fairgate_tenant_output_units_total{tenant=\"$1\"}"; }
out_tokens() { metric "fairgate_tenant_output_tokens_total{tenant=\"$1\"}"; }
# near NAME GOT WANT REL — |got - want| <= want x REL
near() {
	check "$1 ($2 ~ $3)" awk -v g="$2" -v w="$3" -v r="$4" 'BEGIN { d = g - w; if (d < 0) d = -d; exit !(d <= w * r) }'
}
# ratio A B
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.6f", (b > 0 ? a / b : 0) }'; }

# the cost model agrees with the arithmetic above
near "plan: a long request is 19,236.4 units" "$(px_price 16000 200)" 19236.44 0.0001
near "plan: a short request is 915.35 units" "$(px_price 500 200)" 915.35 0.0001

# ---- priced by context ----
for i in 1 2 3 4 5; do
	body "$PX_TMP/long.$i" 16000 $((i * 100000))
	body "$PX_TMP/short.$i" 500 $((i * 100000))
	expect_eq "longdoc request $i served" "$(post $PX_KEY_A "$PX_TMP/long.$i" -o "$PX_TMP/lr.$i" -w '%{http_code}')" 200
	expect_eq "chat request $i served" "$(post $PX_KEY_B "$PX_TMP/short.$i" -o "$PX_TMP/sr.$i" -w '%{http_code}')" 200
done
expect_eq "the engine reported 200 completion tokens for each" \
	"$(cat "$PX_TMP"/lr.* "$PX_TMP"/sr.* | jq -r .usage.completion_tokens | sort -u)" 200
expect_eq "equal output: longdoc billed for 1000 output tokens" "$(out_tokens longdoc)" 1000
expect_eq "equal output: chat billed for 1000 output tokens" "$(out_tokens chat)" 1000
lo=$(out_units longdoc) so=$(out_units chat)
near "longdoc's output: 5 x 3,236.44 units" "$lo" 16182.19 0.0001
near "chat's output: 5 x 415.35 units" "$so" 2076.73 0.0001
want=$(awk -v l="$(px_price 16000 200)" -v s="$(px_price 500 200)" 'BEGIN { printf "%.6f", (l - 16000) / (s - 500) }')
near "output billed in the model's ratio, long/short $(ratio "$lo" "$so") (model $want, by hand 7.792)" \
	"$(ratio "$lo" "$so")" "$want" 0.001
near "  and in the ratio worked out by hand" "$(ratio "$lo" "$so")" 7.792 0.005
near "longdoc billed 5 x 19,236.44 units in all" "$(units longdoc)" 96182.19 0.0001
near "chat billed 5 x 915.35 units in all" "$(units chat)" 4576.73 0.0001
near "status: longdoc's fair-queue service is what it was billed" "$(tenant_field longdoc served_units)" "$(units longdoc)" 1e-6
pctl status >"$PX_TMP/status.txt"
check "status: output priced by context" grep -q 'metering replica_time (output priced by context)' "$PX_TMP/status.txt"
check "status: longdoc pays 16.18 units an output token" grep -qE '^longdoc .* 16\.18 ' "$PX_TMP/status.txt"
check "status: chat pays 2.08 units an output token" grep -qE '^chat .* 2\.08 ' "$PX_TMP/status.txt"

# n = 4: the usage sums 800 completion tokens; each choice decoded 200 of
# them from the prompt, 4 x 3,236.44 (one choice of 800 would be 13,213.8)
body "$PX_TMP/wide" 16000 900000 4
before=$(units longdoc)
expect_eq "n = 4 served" "$(post $PX_KEY_A "$PX_TMP/wide" -o "$PX_TMP/wr" -w '%{http_code}')" 200
expect_eq "n = 4: the engine reported 800 completion tokens" "$(jq -r .usage.completion_tokens "$PX_TMP/wr")" 800
near "n = 4 billed 16,000 + 4 x 3,236.44 units" "$(awk -v a="$(units longdoc)" -v b="$before" 'BEGIN { print a - b }')" 28945.75 0.0001

# the reservation and the 429 are priced by context too
body "$PX_TMP/tight.1" 16000 700000
body "$PX_TMP/tight.2" 16000 800000
expect_eq "tight: one long request fits its 30,000-unit bucket" "$(post $PX_KEY_C "$PX_TMP/tight.1" -o /dev/null -w '%{http_code}')" 200
level=$("$FG_BUILD/fairgatectl" tenant show tight --json | jq -r .quota.bucket_units)
near "tenant show: tight's bucket is down by 19,236 units (level $level)" "$level" 10764 0.02
code=$(post $PX_KEY_C "$PX_TMP/tight.2" -D "$PX_TMP/h429" -o "$PX_TMP/b429" -w '%{http_code}')
lvl=$(tenant_field tight bucket_units)
expect_eq "tight: the second is refused for now" "$code" 429
ms=$(awk 'tolower($1) == "retry-after-ms:" { print $2 + 0 }' "$PX_TMP/h429")
# truthful: the level then plus the refill over the announced wait is the
# request's context price (a flat price would announce ~32 s less), plus
# the herd-spreading stretch of at most 10% of the wait
got=$(awk -v l="$lvl" -v ms="$ms" 'BEGIN { print l + 100 * ms / 1000 }')
check "429: level $lvl + 100/s x ${ms} ms is the context price 19,236, + at most 10% of the wait ($got)" \
	awk -v g="$got" -v l="$lvl" 'BEGIN { c = 19236.44; exit !(g > c * 0.998 && g < c + 0.1 * (c - l) + 1) }'
check "429: the message names the context price" grep -q 'priced at 19236 units' "$PX_TMP/b429"

# ---- priced flat, after a hot reload ----
policy flat
pctl policy apply "$PX_TMP/policy.yaml" >"$PX_TMP/apply.out" 2>&1 ||
	tap_fail "policy apply (flat)" "$(cat "$PX_TMP/apply.out")"
l0=$(out_units longdoc) s0=$(out_units chat)
for i in 6 7; do
	body "$PX_TMP/long.$i" 16000 $((i * 100000))
	body "$PX_TMP/short.$i" 500 $((i * 100000))
	post $PX_KEY_A "$PX_TMP/long.$i" -o /dev/null
	post $PX_KEY_B "$PX_TMP/short.$i" -o /dev/null
done
lf=$(awk -v a="$(out_units longdoc)" -v b="$l0" 'BEGIN { print a - b }')
sf=$(awk -v a="$(out_units chat)" -v b="$s0" 'BEGIN { print a - b }')
near "flat: longdoc's output is 2 x 200 x 3.0932 units" "$lf" 1237.29 0.0001
near "flat: so is chat's: the same price whatever the context" "$sf" 1237.29 0.0001
pctl status >"$PX_TMP/status2.txt"
check "status: output priced flat" grep -q 'metering replica_time (output priced flat)' "$PX_TMP/status2.txt"

check "no reservation left behind" no_leaked_reservations
px_stop_agent_clean
