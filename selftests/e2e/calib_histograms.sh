#!/usr/bin/env bash
# calib_histograms.sh — calibration from the engine's own timing histograms,
# with NON-streamed traffic only: the proxy sees no token of any answer, so
# the streams' step source has nothing (steps observed 0), and before the
# histogram source nothing was measured at all. fairgated in front of a
# fairgate-sim whose hardware is not the policy's (prefill MFU 0.38 against
# 0.50, decode MBU 0.62 against 0.75, 2 ms of step overhead the policy does
# not have) at 1x speed (its histograms are in virtual seconds: at 1x those
# are the wall seconds a real vLLM reports), batch capped at 16 (the
# policy's reference). Poisson arrivals, two shapes, at most 16 in flight
# between them (the client holds the excess), so the engine runs near its
# cap, the reference batch, as calib_truth does:
#   long: 2,000-token prompts, 16-token answers, 1.5 a second, 2 at a time;
#   chat: 120-token prompts, 150-token answers, 8 a second (a little above
#   what 14 at a time can take), 14 at a time.
# After 30 s the measured output weight is within 5% of the truth's
# (fg-true-prices), the fit says it was fed by engine intervals only, and
# status, `fairgatectl status` and the Prometheus metrics count the sources.
# From the histograms alone the batch and the KV move together (every
# sequence holds about the same), so the per-context term is not
# identified: at 15 s a hot reload turns `agent.calibration: on`, and for
# the 15 s left the charged prices follow only the identified terms (the
# prompt-token time and the price at context 0 move at the follow's rate,
# the price per token of context stays the policy's), which status, the
# metrics and `fairgatectl status` say.
source "$(dirname "$0")/fq_env.inc"

fq_netns histfit 46
cat >"$PX_TMP/policy.yaml" <<EOT
replica:
  decode: {batch: 16, context: 500}
tiers:
  standard: {weight: 1, max_context: 32768, kv_cap_tokens: 600000, burst_s: 60, max_queue_s: 120, priority: 0}
tenants:
  - {name: long, tier: standard, units_per_s: 1000000, keys: ["sha256:$(px_hash $PX_KEY_A)"], cache: shared}
  - {name: chat, tier: standard, units_per_s: 1000000, keys: ["sha256:$(px_hash $PX_KEY_B)"], cache: shared}
agent:
  listen: 0.0.0.0:8000
  engine: 127.0.0.1:8001
  metrics_listen: 127.0.0.1:9464
  salt_secret_file: $PX_TMP/salt.key
  calibration: advise
EOT
MFU=0.38 MBU=0.62 OVERHEAD_MS=2 DURATION=30 ON_AT=15
px_start_sim --max-num-seqs 16 --true-prefill-mfu $MFU --true-decode-mbu $MBU --true-step-overhead-ms $OVERHEAD_MS
px_start_agent
truth=$("$FG_BUILD/fg-true-prices" "$PX_TMP/policy.yaml" $MFU $MBU $OVERHEAD_MS 0)
TW=$(jq -r .output_weight <<<"$truth") TP=$(jq -r .prompt_token_us <<<"$truth")
AW=$(pctl status --json | jq -r .calibration.assumed.output_weight)
echo "# true output weight $TW, prompt token $TP us (the policy assumes $AW)"
cal() { pctl status --json | jq -r ".calibration.$1"; }
within() { awk -v m="$1" -v t="$2" -v r="$3" 'BEGIN { d = m / t - 1; if (d < 0) d = -d; exit !(d <= r) }'; }
check "the policy is more than 10% off the truth (so a fit that did not move would fail)" \
	bash -c "! awk -v m=$AW -v t=$TW 'BEGIN { d = m / t - 1; if (d < 0) d = -d; exit !(d <= 0.10) }'"

fq_load "$PX_TMP/load.long.json" --poisson --connections 2 --duration $DURATION --drain 15 \
	--tenant "long:$PX_KEY_A:1.5:8000:16"
fq_load "$PX_TMP/load.chat.json" --poisson --connections 14 --duration $DURATION --drain 15 --seed 2 \
	--tenant "chat:$PX_KEY_B:8:480:150"
: >"$PX_TMP/samples"
for s in $(seq 1 $DURATION); do
	sleep 1
	# the engine's own figures each second, for reading a run again (FG_KEEP_TMP=1)
	sim_direct http://127.0.0.1:8001/metrics | grep -E '^vllm:(request_prefill|inter_token|request_prompt|request_generation|iteration_tokens_total_count|prompt_tokens|generation_tokens|prefix_cache|num_requests_running)' |
		sed "s/^/$s /" >>"$PX_TMP/engine_metrics"
	pctl status --json | jq -r --arg t "$s" '"\($t) \(.calibration.valid) \(.calibration.measured.output_weight // 0) \(.calibration.sources.engine.decode_used) \(.calibration.sources.engine.prefill_used) \(.calibration.fit.prompt_identified // false) \(.calibration.fit.step_identified // false) \(.calibration.fit.context_identified // false) \(.calibration.charged.prompt_token_us) \(.calibration.charged.output_units_at_0) \(.calibration.charged.output_units_per_1k_context)"' >>"$PX_TMP/samples"
	if [ "$s" = "$ON_AT" ]; then
		sed -i 's/calibration: advise/calibration: on/' "$PX_TMP/policy.yaml"
		pctl policy apply "$PX_TMP/policy.yaml" >"$PX_TMP/apply.out" 2>&1 ||
			tap_fail "policy apply (on)" "$(cat "$PX_TMP/apply.out")"
	fi
done
pctl status --json >"$PX_TMP/status.json"
MW=$(jq -r '.calibration.measured.output_weight // 0' "$PX_TMP/status.json")
MP=$(jq -r '.calibration.measured.prompt_token_us // 0' "$PX_TMP/status.json")
src() { jq -r ".calibration.sources.$1" "$PX_TMP/status.json"; }
echo "# measured output weight $MW (true $TW, assumed $AW), prompt token $MP us (true $TP); from $(src engine.decode_used) decode and $(src engine.prefill_used) prefill intervals, $(src streams.used) stream steps; fit rms $(jq -r .calibration.fit.rms_ms "$PX_TMP/status.json") ms"
# from which second on every sample stayed within 5% (none: it left again later)
first=$(awk -v tw="$TW" '{ d = $3 / tw - 1; if (d < 0) d = -d
	if ($2 == "true" && d <= 0.05) { if (n == "") n = $1 } else n = "" } END { print n }' "$PX_TMP/samples")
echo "# within 5% from ${first:-none} s on; measured each second: $(awk '{ printf "%s", ($3 ? sprintf("%.2f ", $3) : "- ") }' "$PX_TMP/samples")"
check "the streams saw no step (non-streamed only: $(jq -r .calibration.observations.steps_observed "$PX_TMP/status.json") observed)" \
	test "$(jq -r .calibration.observations.steps_observed "$PX_TMP/status.json") $(src streams.used)" = "0 0"
check "the fit is valid, from engine intervals only (weight share $(src engine.weight_share))" \
	test "$(jq -r .calibration.valid "$PX_TMP/status.json") $(src engine.weight_share)" = "true 1"
check "  at least $((2 * 5)) intervals used ($(src engine.decode_used) decode, $(src engine.prefill_used) prefill)" \
	bash -c "[ $(src engine.decode_used) -ge 5 ] && [ $(src engine.prefill_used) -ge 5 ]"
check "measured output weight within 5% of the truth's ($MW vs $TW)" within "$MW" "$TW" 0.05
check "measured prompt-token time within 5% of the truth's ($MP vs $TP us)" within "$MP" "$TP" 0.05
check "no engine restart counted ($(src engine.resets))" test "$(src engine.resets)" = 0
# `on` from ON_AT: each charged price moved only while its term was
# identified. Columns: 6-8 prompt, step, context identified; 9-11 charged
# prompt-token us, units at context 0, units per 1k of context.
AS=$(pctl status --json | jq -c .calibration.assumed)
asm() { jq -r ".$1" <<<"$AS"; }
on_rows() { awk -v from=$((ON_AT + 1)) '$1 >= from' "$PX_TMP/samples"; }
echo "# on from $ON_AT s: identified (prompt step context) and charged (prompt us, units at 0, per 1k) each second: $(on_rows | awk '{ printf "%s%s%s %.2f %.3f %.4f; ", substr($6,1,1), substr($7,1,1), substr($8,1,1), $9, $10, $11 }')"
check "the fit says the per-context term is not identified (from the histograms alone), the prompt-token time is" \
	test "$(jq -r '.calibration.fit | "\(.context_identified) \(.prompt_identified)"' "$PX_TMP/status.json")" = "false true"
# a price whose term was never identified since ON_AT is exactly the
# policy's; one identified throughout moved towards the measured
held_or_moved() { # COLUMN_IDENTIFIED COLUMN_CHARGED ASSUMED
	on_rows | awk -v ci="$1" -v cc="$2" -v a="$3" '
		{ n++; if ($ci == "true") id++; last = $cc
		  if (id == 0 && (($cc / a - 1) > 1e-9 || (1 - $cc / a) > 1e-9)) moved_unidentified = 1 }
		END { if (!n) exit 1
		      if (id == 0) exit moved_unidentified
		      d = last / a - 1; if (d < 0) d = -d; exit !(id == n && d > 0.005) }'
}
check "on: the per-context price, never identified, is the policy's ($(asm output_units_per_1k_context) units per 1k)" \
	held_or_moved 8 11 "$(asm output_units_per_1k_context)"
check "on: the prompt-token time, identified, moved towards the measured ($(asm prompt_token_us) -> $(on_rows | tail -1 | cut -d' ' -f9) us)" \
	held_or_moved 6 9 "$(asm prompt_token_us)"
check "on: the price at context 0 followed its term's identification ($(asm output_units_at_0) -> $(on_rows | tail -1 | cut -d' ' -f10))" \
	held_or_moved 7 10 "$(asm output_units_at_0)"
check "on: the charged prompt-token time moved at most 1.25x a minute" bash -c \
	"awk -v a=$(asm prompt_token_us) '\$1 == $DURATION { r = \$9 / a; if (r < 1) r = 1 / r; exit !(r <= exp(log(1.25) * ($DURATION - $ON_AT + 1) / 60) * 1.001) }' '$PX_TMP/samples'"
ip netns exec $PX_SNS curl -sS http://127.0.0.1:9464/metrics >"$PX_TMP/metrics.txt"
"$FG_BUILD/fairgatectl" status --ctl "$PX_TMP/ctl.sock" >"$PX_TMP/status.txt"
check "metrics say which terms are identified" bash -c \
	"grep -q '^fairgate_calibration_term_identified{term=\"per_context\"} 0\$' '$PX_TMP/metrics.txt' &&
	 grep -q '^fairgate_calibration_term_identified{term=\"prompt_token\"} 1\$' '$PX_TMP/metrics.txt' &&
	 grep -q '^fairgate_calibration_mode{mode=\"on\"} 1\$' '$PX_TMP/metrics.txt'"
check "fairgatectl status says the per-context term is not identified and its price holds" \
	grep -q 'per-context term is not identified.*its price holds' "$PX_TMP/status.txt"
check "prometheus counts observations by source" bash -c \
	"grep -q '^fairgate_calibration_observations_total{source=\"streams\"} 0\$' '$PX_TMP/metrics.txt' &&
	 grep -qE '^fairgate_calibration_observations_total\\{source=\"engine_decode\"\\} [1-9]' '$PX_TMP/metrics.txt' &&
	 grep -qE '^fairgate_calibration_observations_used\\{source=\"engine_prefill\"\\} [1-9]' '$PX_TMP/metrics.txt'"
check "fairgatectl status names the sources" \
	grep -qE 'fed by: 0 steps seen in the streams .* [0-9]+ decode and [0-9]+ prefill intervals' "$PX_TMP/status.txt"
fq_wait_loads
for t in long chat; do
	expect_eq "$t: every request answered 200" \
		"$(jq -s '[.[] | .tenants[] | (.completed == (.status["200"] // 0)) and .completed > 0] | all' "$PX_TMP/load.$t.json")" true
done
check "no reservation left behind" no_leaked_reservations
px_stop_agent_clean
