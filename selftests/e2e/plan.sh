#!/usr/bin/env bash
# plan.sh — `fairgatectl plan` reproduces the seed's table from the example
# policy (JSON keys per DESIGN.md, within 0.5%), and its human output shows
# the derivations the way the seed writes them.
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
near tenant_units_per_s "$(j tenant_units_per_s)" 17725
near tenant_replicas "$(j tenant_replicas)" 0.97
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
check "human output: tenant load" grep -q '5 x (2000 + 500 x 3.093) = 17733, or 0.97 replicas' "$tmp/plan.txt"
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
