#!/usr/bin/env bash
# plan.sh — `fairgatectl plan` reproduces the seed's table from the example
# policy (its JSON keys within 0.5%), the price of an output token
# by its context (issue #21's table), and its human output shows the
# derivations the way the seed writes them.
source "$(dirname "$0")/lib.sh"
ctl=$FG_BUILD/fairgatectl
pol=$FG_ROOT/examples/policy.yaml
tmp=$(mktemp -d); on_exit "rm -rf $tmp"

# near NAME GOT WANT — within 0.5%
near() {
	if awk -v g="$2" -v w="$3" 'BEGIN { d = g - w; if (d < 0) d = -d; exit !(d <= (w < 0 ? -w : w) * 0.005) }'; then
		tap_ok "$1 = $2 (seed $3)"
	else
		tap_fail "$1" "got $2, want $3 ±0.5%"
	fi
}

if ! "$ctl" plan --policy "$pol" --json --rps 5 --in 2000 --out 500 --context 131072 >"$tmp/plan.json" 2>"$tmp/err"; then
	tap_fail "plan --json runs" "$(cat "$tmp/err")"
	exit 1
fi
j() { jq -r ".$1" "$tmp/plan.json"; }
near prompt_token_us "$(j prompt_token_us)" 35.7
near decode_step_ms "$(j decode_step_ms)" 14.1
near output_token_us "$(j output_token_us)" 110
near output_weight "$(j output_weight)" 3.09
near replica_units_per_s "$(j replica_units_per_s)" 18232
near kv_bytes_per_token "$(j kv_bytes_per_token)" 327680
near kv_pool_tokens "$(j kv_pool_tokens)" 646503
near dedicated_usd_per_month "$(j dedicated_usd_per_month)" 7200
# the seed's load priced by context: 499 decode steps at 2,001..2,499 tokens,
# t(2,250) = 3.5963 units: 5 x (2,000 + 499 x 3.5963) (the seed prices it
# flat at 3.09 units an output token: 17,725, checked below)
near tenant_units_per_s "$(j tenant_units_per_s)" 18973
near tenant_replicas "$(j tenant_replicas)" 1.041
expect_eq "output pricing is by context by default" "$(j output_pricing)" context
near output_token_weights_us "$(j output_token_weights_us)" 54.84
near output_token_ns_per_context_token "$(j output_token_ns_per_context_token)" 32.60
near 'output_token_us_at_context["1700"]' "$(j 'output_token_us_at_context["1700"]')" 110
near 'output_token_us_at_context["8192"]' "$(j 'output_token_us_at_context["8192"]')" 322
near 'output_token_us_at_context["32768"]' "$(j 'output_token_us_at_context["32768"]')" 1120
near 'output_token_us_at_context["131072"]' "$(j 'output_token_us_at_context["131072"]')" 4330
near 'output_weight_at_context["1700"]' "$(j 'output_weight_at_context["1700"]')" 3.09
near 'output_weight_at_context["8192"]' "$(j 'output_weight_at_context["8192"]')" 9.0
near 'output_weight_at_context["32768"]' "$(j 'output_weight_at_context["32768"]')" 31.5
near 'output_weight_at_context["131072"]' "$(j 'output_weight_at_context["131072"]')" 121
near context_output_token_us "$(j context_output_token_us)" 4330
near context_output_weight "$(j context_output_weight)" 121

# flat output pricing: the seed's arithmetic, 5 x (2,000 + 500 x 3.09)
sed 's/^  output_pricing: context /  output_pricing: flat    /' "$pol" >"$tmp/flat.yaml"
"$ctl" plan --policy "$tmp/flat.yaml" --json --rps 5 --in 2000 --out 500 >"$tmp/flat.json"
expect_eq "output_pricing: flat is what plan prices with" "$(jq -r .output_pricing "$tmp/flat.json")" flat
near "flat tenant_units_per_s" "$(jq -r .tenant_units_per_s "$tmp/flat.json")" 17725
near "flat tenant_replicas" "$(jq -r .tenant_replicas "$tmp/flat.json")" 0.97
near "flat output_weight" "$(jq -r .output_weight "$tmp/flat.json")" 3.09
"$ctl" plan --policy "$tmp/flat.yaml" --rps 5 --in 2000 --out 500 >"$tmp/flat.txt"
check "flat human output: tenant load at the seed's weight" grep -q '5 x (2000 + 500 x 3.093) = 17733, or 0.97 replicas' "$tmp/flat.txt"
check "flat human output says so" grep -q 'output pricing: flat: every output token at 3.09 units' "$tmp/flat.txt"

# --context N adds N to the table, in order
"$ctl" plan --policy "$pol" --json --context 65536 >"$tmp/c64.json"
expect_eq "--context 65536 joins the table in order" \
	"$(jq -r '.output_token_us_at_context | keys_unsorted | join(",")' "$tmp/c64.json")" 1700,8192,32768,65536,131072
near 'output_weight_at_context["65536"]' "$(jq -r '.output_weight_at_context["65536"]' "$tmp/c64.json")" 61.48
near context_kv_gib "$(j context_kv_gib)" 40.0
near context_kv_bytes "$(j context_kv_bytes)" 42949672960
near context_kv_bytes_per_gpu "$(j context_kv_bytes_per_gpu)" 10.7e9
near context_pool_share "$(j context_pool_share)" 0.2027

# without --rps/--context the optional keys are absent
"$ctl" plan --policy "$pol" --json >"$tmp/bare.json"
expect_eq "optional keys absent without --rps/--context" \
	"$(jq -r 'has("tenant_units_per_s") or has("context_kv_gib")' "$tmp/bare.json")" false

"$ctl" plan --policy "$pol" --rps 5 --in 2000 --out 500 --context 131072 >"$tmp/plan.txt"
check "human output derives the prompt token like the seed" \
	grep -q 'prompt token  = 2 x 70.55e9 / (4 x 1979e12 x 0.50) = 35.65 us' "$tmp/plan.txt"
check "human output derives the decode step" grep -q 'decode step   = (17.6 GB + 128 x 1700 x 327680 B / 4) / 2.51e12 = 14.1 ms' "$tmp/plan.txt"
check "human output: 110 us output token" grep -q 'output token  = 14.1 ms / 128 = 110.3 us' "$tmp/plan.txt"
check "human output: weight 3.09" grep -q '= 3.09 prompt-token units' "$tmp/plan.txt"
check "human output: 18233 units/s budget (seed: 18,232)" grep -q '= 18233 units per second at a 65% ceiling' "$tmp/plan.txt"
check "human output: tenant load by context" grep -q '5 x (2000 + 499 x 3.596) = 18973, or 1.04 replicas' "$tmp/plan.txt"
check "human output: its decode steps" grep -q '499 decode steps from 2001 to 2499 tokens of context, 3.596 units each' "$tmp/plan.txt"
check "human output: the per-token formula" grep -q 'output token at context c = 7.02 ms / 128 + c x 327680 B / 4 / 2.51e12 = 54.84 us + c x 32.60 ns' "$tmp/plan.txt"
check "human output: 32K row" grep -qE '^ +32768 +1123.2 us +31.51$' "$tmp/plan.txt"
check "human output: 128K row" grep -qE '^ +131072 +4328.4 us +121.42$' "$tmp/plan.txt"
check "human output: the reference row is the weight" grep -qE '^ +1700 +110.3 us +3.09  \(reference' "$tmp/plan.txt"
check "human output: --context prints the per-token price there" grep -q 'output token  = 54.84 us + 131072 x 32.60 ns = 4328.4 us = 121.42 units' "$tmp/plan.txt"
check "human output: 128K context 40.0 GiB" grep -q '= 40.0 GiB, 10.7 GB per GPU at TP=4' "$tmp/plan.txt"
check "human output: 20% of pool" grep -q 'share of pool = 131072 / 646503 = 20%' "$tmp/plan.txt"
check "human output: dedicated \$7200" grep -q '= \$7200 per month' "$tmp/plan.txt"

# bad flags: exit 2 and one line
"$ctl" plan --policy "$pol" --rps 5 >/dev/null 2>"$tmp/e1"; rc=$?
expect_eq "--rps without --in/--out is exit 2" "$rc" 2
check "--rps alone says what is missing" grep -q -- '--rps, --in and --out go together' "$tmp/e1"
"$ctl" plan --policy "$pol" --context abc >/dev/null 2>"$tmp/e2"; rc=$?
expect_eq "non-numeric --context is exit 2" "$rc" 2
"$ctl" plan --policy /nonexistent.yaml >/dev/null 2>"$tmp/e3"; rc=$?
expect_eq "missing policy file is exit 2" "$rc" 2
check "missing policy names the file" grep -q '/nonexistent.yaml' "$tmp/e3"

# A TPOT tier: the batch its target allows on the seed replica (7.02 ms of
# weights + 32.6 ns per token: 89 sequences of 1,700 tokens within 12 ms) and
# the decode throughput that forgoes (89 / 11.95 ms against 128 / 14.1 ms),
# priced on the dedicated replica; policy check says the same and refuses a
# target one sequence misses alone.
sed -e 's/^  premium:$/&\n    tpot_p99_ms: 12/' "$pol" >"$tmp/tpot.yaml"
"$ctl" plan --policy "$tmp/tpot.yaml" >"$tmp/tpot.txt" 2>&1
"$ctl" plan --policy "$tmp/tpot.yaml" --json >"$tmp/tpot.json" 2>&1
check "plan prints the TPOT reservation's batch" grep -q 'TPOT reservation (tier premium, p99 12 ms): decode batch <= 89 at 1700 tokens of context, step 12.0 ms' "$tmp/tpot.txt"
check "plan prices what it forgoes next to the dedicated replica" \
	grep -qE '^  forgone       = 17\.[0-9]% of the replica = \$12[0-9]{2} per month \(dedicated replica \$7200\)' "$tmp/tpot.txt"
expect_eq "plan --json: the reservation's price is its share of the dedicated replica" \
	"$(jq -r '.tpot_reservations[0] | ((.usd_per_month - .forgone_share * 7200) | fabs < 1e-6) and .max_batch == 89' "$tmp/tpot.json")" true
expect_eq "plan --json: no TPOT tier, no tpot_reservations key" "$(j tpot_reservations)" null
"$ctl" policy check "$tmp/tpot.yaml" >"$tmp/tpot_check.txt" 2>&1
check "policy check says what the target means" grep -q 'tier premium: tpot_p99_ms 12: decode batch of at most 89 sequences' "$tmp/tpot_check.txt"
sed -i 's/tpot_p99_ms: 12/tpot_p99_ms: 6/' "$tmp/tpot.yaml"
"$ctl" policy check "$tmp/tpot.yaml" >"$tmp/tpot_bad.txt" 2>&1; rc=$?
expect_eq "policy check refuses a target no batch can keep (exit 2)" "$rc" 2
check "and says why" grep -q 'tpot_p99_ms 6 is below the step time of one sequence' "$tmp/tpot_bad.txt"
