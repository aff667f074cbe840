#!/usr/bin/env bash
# calib_truth.sh — prices measured, scored in truth: fairgated in front of a
# fairgate-sim whose hardware is not the policy's (prefill MFU 0.38 against
# 0.50, decode MBU 0.62 against 0.75, 3 ms of overhead a step the cost model
# does not have), at 2x speed, batch capped at 16 (the policy's reference).
# Two tenants with equal contracts above the replica, both backlogged:
#   prompts: 400-, 1,200- and 3,500-token prompts, 8-token answers (18 clients);
#   outputs: 120-token prompts, 150-token answers (96 clients), streamed.
# Phase 1, agent.calibration: advise: the measured output weight comes
# within 5% of the truth's (fg-true-prices: the truth through the same
# cost_model.c formulas) within a stated number of settled requests, while
# the prices stay the policy's; the outputs tenant's share of TRUE replica
# time (fairgate-sim's x-sim replica_ms of each answer) is printed: that is
# calibration off. Phase 2, a hot reload to `on`: the charged prices move at
# most 1.25x a minute and reach the measurement, and the outputs tenant's
# share of true replica time is the share it was billed (within 5%), which
# with the policy's prices it was not. (Its weighted share, 50%, is not met:
# the fair queue bills it 57-59% in this scenario either way; printed.)
# The engine's own inter-token histogram agrees with the steps the proxy saw.
source "$(dirname "$0")/fq_env.inc"

fq_netns calib 45
policy() { # MODE
	cat >"$PX_TMP/policy.yaml" <<EOT
replica:
  decode: {batch: 16, context: 500}
tiers:
  standard: {weight: 1, max_context: 32768, kv_cap_tokens: 600000, burst_s: 60, max_queue_s: 120, priority: 0}
tenants:
  - {name: prompts, tier: standard, units_per_s: 100000, keys: ["sha256:$(px_hash $PX_KEY_A)"], cache: shared}
  - {name: outputs, tier: standard, units_per_s: 100000, keys: ["sha256:$(px_hash $PX_KEY_B)"], cache: shared}
agent:
  listen: 0.0.0.0:8000
  engine: 127.0.0.1:8001
  metrics_listen: 127.0.0.1:9464
  salt_secret_file: $PX_TMP/salt.key
  calibration: $1
EOT
}
policy advise
px_start_sim --speedup 2 --max-num-seqs 16 --true-prefill-mfu 0.38 --true-decode-mbu 0.62 --true-step-overhead-ms 3
px_start_agent
truth=$("$FG_BUILD/fg-true-prices" "$PX_TMP/policy.yaml" 0.38 0.62 3 0)
TW=$(jq -r .output_weight <<<"$truth")
AW=$(pctl status --json | jq -r .calibration.assumed.output_weight)
echo "# true output weight $TW (the policy assumes $AW)"

cal() { pctl status --json | jq -r ".calibration.$1"; }
# load SECONDS OUT_PREFIX — both tenants backlogged for SECONDS
load() {
	fq_load "$2.prompts.json" --closed --connections 6 --duration "$1" --drain 20 \
		--tenant "p400:$PX_KEY_A:0:1600:8:stream" --tenant "p1200:$PX_KEY_A:0:4800:8:stream" \
		--tenant "p3500:$PX_KEY_A:0:14000:8:stream"
	fq_load "$2.outputs.json" --closed --connections 96 --duration "$1" --drain 20 --seed 2 \
		--tenant "outputs:$PX_KEY_B:0:480:150:stream"
}
# share PREFIX — the outputs tenant's share (percent) of the true replica time
share() {
	jq -s '[.[] | .tenants[] | {o: (if .name == "outputs" then .sim_replica_ms else 0 end), a: .sim_replica_ms}]
		| (map(.o) | add) * 100 / (map(.a) | add)' "$1.prompts.json" "$1.outputs.json" | xargs printf '%.1f'
}
within() { awk -v m="$1" -v t="$2" -v r="$3" 'BEGIN { d = m / t - 1; if (d < 0) d = -d; exit !(d <= r) }'; }

# ---- phase 1: advise ----
read -r bp0 bo0 < <(fq_billed prompts outputs)
load 25 "$PX_TMP/off"
converged= settled=
for i in $(seq 25); do
	sleep 1
	read -r n w c < <(pctl status --json | jq -r '"\(.requests.settled) \(.calibration.measured.output_weight // 0) \(.calibration.charged.output_weight)"')
	echo "$i $n $w $c" >>"$PX_TMP/phase1"
	if within "$w" "$TW" 0.05; then
		[ -z "$converged" ] && converged=$n
	else
		converged=
	fi
done
fq_wait_loads
read -r bp1 bo1 < <(fq_billed prompts outputs)
off=$(share "$PX_TMP/off")
MW=$(cal measured.output_weight)
echo "# advise: measured output weight $MW (true $TW); charged $(cal charged.output_weight); steps observed $(cal observations.steps_observed) of $(cal observations.steps_seen), fit rms $(cal fit.rms_ms) ms"
echo "# calibration off (advise charges the policy's prices): the outputs tenant took $off% of the true replica time and was billed $(fq_share "$bo0" "$bo1" "$bp0" "$bp1")% of the units"
pctl plan --policy "$PX_TMP/policy.yaml" --calibrated | sed -n '/^calibration:/,$p' | sed 's/^/# /'
read -r itl_e itl_p < <(pctl status --json | jq -r '"\(.calibration.inter_token_ms.engine // 0) \(.calibration.inter_token_ms.proxy // 0)"')
# the sim's histograms are in its virtual time: the proxy's wall-clock steps x the speedup.
# A cross-check for gross errors (a clock mixed up, steps miscounted), not a
# measurement: the proxy's mean is over the steps it could tell apart and
# is read through the ASan-built agent's wakeups, which put it 3-22% above
# the engine's in four runs; 30% still catches a factor of 2.
itl_p=$(awk -v p="$itl_p" 'BEGIN { print p * 2 }')
check "the steps the proxy saw agree with the engine's own inter-token latency within 30% (proxy $itl_p ms x 2, engine $itl_e ms)" within "$itl_p" "$itl_e" 0.30
check "the fit is valid and unbounded" test "$(cal valid) $(cal bounded)" = "true false"
check "measured output weight within 5% of the truth's ($MW vs $TW)" within "$MW" "$TW" 0.05
check "  and stayed there from request $converged on (of $(cal observations.used) steps used)" test -n "$converged"
check "advise charges the policy's prices" within "$(cal charged.output_weight)" "$AW" 1e-9
sharp=$(grep -c 'calibration: the engine measures an output weight' "$PX_TMP/agent.log")
check "the sharp change was logged, once, not at every refit ($sharp lines in 25 refits)" test "$sharp" -ge 1 -a "$sharp" -le 2
check "  naming advise" grep -q 'agent.calibration: advise, prices unchanged' "$PX_TMP/agent.log"
check "prometheus exports measured and assumed side by side" bash -c \
	"ip netns exec $PX_SNS curl -sS http://127.0.0.1:9464/metrics | grep -q '^fairgate_calibration_output_weight{model=\"measured\"}' &&
	 ip netns exec $PX_SNS curl -sS http://127.0.0.1:9464/metrics | grep -q '^fairgate_calibration_output_weight{model=\"assumed\"}'"

# ---- phase 2: on ----
policy on
pctl policy apply "$PX_TMP/policy.yaml" >"$PX_TMP/apply.out" 2>&1 || tap_fail "policy apply (on)" "$(cat "$PX_TMP/apply.out")"
t0=$(date +%s.%N)
load 55 "$PX_TMP/warm"
worst_rate=0
prev=$AW prev_t=$t0
for i in $(seq 5); do
	sleep 10
	c=$(cal charged.output_weight) t=$(date +%s.%N)
	worst_rate=$(awk -v a="$prev" -v b="$c" -v dt="$(awk -v x="$t" -v y="$prev_t" 'BEGIN { print x - y }')" -v w="$worst_rate" \
		'BEGIN { r = b / a; if (r < 1) r = 1 / r; r = exp(log(r) * 60 / dt); print (r > w ? r : w) }')
	prev=$c prev_t=$t
done
fq_wait_loads
read -r bp2 bo2 < <(fq_billed prompts outputs)
load 25 "$PX_TMP/on"
fq_wait_loads
read -r bp3 bo3 < <(fq_billed prompts outputs)
on=$(share "$PX_TMP/on")
CW=$(cal charged.output_weight) MW=$(cal measured.output_weight)
echo "# on: charged output weight $CW, measured $MW, true $TW; the steepest change seen ${worst_rate}x a minute"
echo "# calibration on: the outputs tenant took $on% of the true replica time (off: $off%) and was billed $(fq_share "$bo2" "$bo3" "$bp2" "$bp3")% of the units"
# sampled every 10 s between 1 s ticks: a window can hold 11 s of moves
check "prices moved at most 1.25x a minute (steepest ${worst_rate}x over 10 s windows)" \
	awk -v r="$worst_rate" 'BEGIN { exit !(r <= exp(log(1.25) * 1.1) + 1e-3) }'
check "the charged output weight reached the measurement ($CW vs $MW)" within "$CW" "$MW" 0.03
check "  which is within 5% of the truth's" within "$CW" "$TW" 0.05
# What calibration answers for: the prices are the truth's, so the share of
# true replica time is the share billed. The billed share itself is the fair
# queue's (here 57-59% to the outputs tenant at equal weights, off or on:
# README known gaps), so the weighted share (50%) is printed, not asserted.
billed_off=$(fq_share "$bo0" "$bo1" "$bp0" "$bp1") billed_on=$(fq_share "$bo2" "$bo3" "$bp2" "$bp3")
echo "# weighted share 50%: true share off $off%, on $on%"
check "calibration on: the outputs tenant's true share is its billed share within 5% ($on% vs $billed_on%)" within "$on" "$billed_on" 0.05
check "  off, the policy's prices gave it more truth than they billed ($off% vs $billed_off%)" \
	awk -v t="$off" -v b="$billed_off" -v t2="$on" -v b2="$billed_on" 'BEGIN { exit !(t / b > t2 / b2 && t > b) }'
check "  and on it is closer to its weighted share than off ($on% vs $off%)" awk -v a="$on" -v b="$off" 'BEGIN { da = a - 50; db = b - 50; if (da < 0) da = -da; if (db < 0) db = -db; exit !(da < db) }'
for f in off on; do
	for t in prompts outputs; do
		expect_eq "$f/$t: every request answered 200" \
			"$(jq -s '[.[] | .tenants[] | (.completed == (.status["200"] // 0))] | all' "$PX_TMP/$f.$t.json")" true
	done
done
check "no reservation left behind" no_leaked_reservations
px_stop_agent_clean
