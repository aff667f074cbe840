#!/usr/bin/env bash
# fq_tpot.sh — a TPOT reservation holds a tenant's inter-token times under
# its target while a standard tenant floods the replica, on a simulator
# slower than the policy says, once calibration has measured the engine;
# with the reservation sized on the policy's model (advise) the figures are
# printed; with the reservation off the tenant misses its target.
#
# fairgated in front of fairgate-sim at real speed. The policy's replica is an
# 8B model on one H200 (weights 8.03 GB, 131,072 B of KV per token, a
# 1,000,000-token pool); the simulator's truth is slower than the policy says:
# prefill MFU 0.38 (policy 0.50), decode MBU 0.62 (0.75) and 3 ms per step
# the cost model does not have. So a decode step the gateway assumes takes
# 2.23 ms + 36.4 ns per token of context really takes 5.70 ms + 44.0 ns, and
# a prompt token 21.4 us, not 16.2.
#   lat:   4 streams, ~100-token prompts, 200-token answers, tier `latency`
#          (tpot_p99_ms: 15, kv_cap_tokens 8192)
#   flood: 200 connections, ~250-token prompts, up to 4000-token answers
#          (--output-len uniform), not streamed (a batch-style neighbour: and
#          200 streams' events would load the 2 shared cores, and so every
#          client's timings, more than the engine does), tier standard
# Phases (hot reloads, agent.calibration: on until the advise phase):
#   calibration, 14 s, no reservation: streams only (a non-streamed request
#     at the engine hides the steps), Poisson arrivals so the batch varies:
#     ~100-token prompts with up to 300-token answers, and ~7,000-token
#     prompts with up to 400-token answers so the context varies; the fit
#     must recover every term of the truth within 5% (the per-sequence
#     term, 0 in truth, within 5% of the true step at the reference batch);
#   on: tpot_p99_ms: 15, the cap on the measured step: lat's client-measured
#     p99 inter-token time under 15 ms (asserted);
#   advise: the cap on the policy's step (printed, not asserted);
#   off: the key removed: the flood grows the batch, lat's p99 over 15 ms.
# Inter-token times are fg-load's itl_ms (the gap between consecutive
# content events as the client reads them).
source "$(dirname "$0")/fq_env.inc"

fq_netns tpot 41
TARGET_MS=15
MFU=0.38 MBU=0.62 OVERHEAD_MS=3

# tpot_policy TPOT_KEY MODE — the policy, with TPOT_KEY in the latency tier
tpot_policy() {
	cat >"$PX_TMP/policy.yaml" <<EOT
replica:
  model: {name: llama-3.1-8b, params: 8.03e9, layers: 32, kv_heads: 8, head_dim: 128,
          weight_bytes: 1, kv_bytes: 2}
  gpus: 1
  gpu: {peak_flops: 1979e12, hbm_bytes_per_s: 4.8e12, usd_per_hour: 3.50}
  efficiency: {prefill_mfu: 0.50, decode_mbu: 0.75}
  decode: {batch: 128, context: 1700}
  kv_pool_tokens: 1000000
tiers:
  latency: {weight: 1, max_context: 4096, kv_cap_tokens: 8192, max_queue_s: 60$1}
  standard: {weight: 1, max_context: 8192, kv_cap_tokens: 900000, max_queue_s: 120}
tenants:
  - {name: lat, tier: latency, units_per_s: 1000000, keys: ["sha256:$(px_hash $PX_KEY_A)"], cache: shared}
  - {name: flood, tier: standard, units_per_s: 1000000, keys: ["sha256:$(px_hash $PX_KEY_B)"], cache: shared}
agent:
  listen: 0.0.0.0:8000
  engine: 127.0.0.1:8001
  metrics_listen: 127.0.0.1:9464
  salt_secret_file: $PX_TMP/salt.key
  calibration: $2
EOT
}
# reload TPOT_KEY MODE
reload() {
	tpot_policy "$1" "$2"
	pctl policy apply "$PX_TMP/policy.yaml" >"$PX_TMP/apply.out" 2>&1 ||
		tap_fail "policy reload ($2${1:+, tpot})" "$(cat "$PX_TMP/apply.out")"
}
tpot_policy ", tpot_p99_ms: $TARGET_MS" on
"$FG_BUILD/fairgatectl" policy check "$PX_TMP/policy.yaml" >"$PX_TMP/check.out" 2>&1 ||
	{ tap_fail "policy check" "$(cat "$PX_TMP/check.out")"; exit 1; }
sed 's/^/# /' "$PX_TMP/check.out"
truth=$("$FG_BUILD/fg-true-prices" "$PX_TMP/policy.yaml" $MFU $MBU $OVERHEAD_MS 0)
tpot_policy "" on
px_start_sim --max-num-seqs 256 --output-len uniform --seed 7 \
	--true-prefill-mfu $MFU --true-decode-mbu $MBU --true-step-overhead-ms $OVERHEAD_MS
px_start_agent

# ---- calibration: streams only, no reservation ----
fq_load "$PX_TMP/calib.json" --poisson --connections 40 --duration 14 --drain 5 --seed 3 \
	--tenant "short:$PX_KEY_B:10:400:300:stream" --tenant "long:$PX_KEY_B:0.6:28000:400:stream"
sleep 14
cal() { pctl status --json | jq -r ".calibration.$1"; }
fit=$(pctl status --json | jq -c '.calibration | {valid, bounded, fit, observations, sources}')
echo "# calibration after 14 s: $fit"
echo "# truth: $truth"

# ---- on: the reservation on the measured step ----
reload ", tpot_p99_ms: $TARGET_MS" on
fq_load "$PX_TMP/flood.json" --closed --connections 200 --duration 60 --drain 3 --timeout 120 \
	--seed 2 --tenant "flood:$PX_KEY_B:0:1000:4000"

# tpot_watch FILE — the gateway's TPOT books once a second until killed
tpot_watch() {
	spawn "$1.err" bash -c 'while :; do "$2" status --json --ctl "$3" |
		jq -c "[.scheduling.tpot.sequences, .scheduling.tpot.context_tokens, .scheduling.tpot.modeled_step_ms, .scheduling.tpot.step_model]";
		sleep 1; done >"$1"' _ "$1" "$FG_BUILD/fairgatectl" "$PX_TMP/ctl.sock"
	TPOT_WATCH_PID=$SPAWNED_PID
}
# lat_phase NAME — lat's streams for 9 s, in the foreground
lat_phase() {
	ip netns exec "$PX_CNS" "$FG_BUILD/fg-load" --target "$PX_SRV:8000" --closed --connections 4 \
		--duration 9 --drain 10 --tenant "lat:$PX_KEY_A:0:400:200:stream" >"$PX_TMP/lat_$1.json" \
		2>"$PX_TMP/lat_$1.err"
}
sleep 2
tpot_watch "$PX_TMP/books_on"
running_on=$(sim_metric vllm:num_requests_running)
step_model_on=$(sched tpot.step_model)
flood_done0=$(tenant_field flood settled)
lat_phase on
flood_done1=$(tenant_field flood settled)
kill -TERM "$TPOT_WATCH_PID" 2>/dev/null; wait "$TPOT_WATCH_PID" 2>/dev/null

# ---- advise: the reservation on the policy's step ----
reload ", tpot_p99_ms: $TARGET_MS" advise
sleep 1
tpot_watch "$PX_TMP/books_advise"
running_advise=$(sim_metric vllm:num_requests_running)
step_model_advise=$(sched tpot.step_model)
lat_phase advise
kill -TERM "$TPOT_WATCH_PID" 2>/dev/null; wait "$TPOT_WATCH_PID" 2>/dev/null

# ---- off: no reservation ----
reload "" advise
sleep 2
running_off=$(sim_metric vllm:num_requests_running)
lat_phase off
tpot_after=$(sched tpot)
kill -TERM "${FQ_LOADS[@]}" 2>/dev/null
fq_wait_loads

pct() { jq -r ".tenants[0].itl_ms.$2" "$1"; }
on=$(pct "$PX_TMP/lat_on.json" p99) advise=$(pct "$PX_TMP/lat_advise.json" p99)
off=$(pct "$PX_TMP/lat_off.json" p99)
for ph in on advise off; do
	f=$PX_TMP/lat_$ph.json
	echo "# lat, $ph: itl p50 $(pct "$f" p50) p90 $(pct "$f" p90) p99 $(pct "$f" p99) max $(pct "$f" max) ms over $(jq -r '.tenants[0].tokens_received' "$f") tokens, $(jq -r '.tenants[0].completed' "$f") requests"
done
books() { jq -s "map(.[$2] // 0) | max" "$PX_TMP/books_$1"; }
for ph in on advise; do
	echo "# gateway books, $ph: at most $(books $ph 0) sequences, $(books $ph 1) tokens of context reserved, modeled step at most $(books $ph 2) ms"
done
echo "# engine running: $running_on on, $running_advise advise, $running_off off"
echo "# flood requests settled during the on phase: $((flood_done1 - flood_done0))"
echo "# reservation on the policy's model (advise): lat's p99 $advise ms against the ${TARGET_MS} ms target"

# every term of the fit against the truth's
term() { jq -r ".$1" <<<"$2"; }
within() { awk -v m="$1" -v t="$2" -v r="$3" 'BEGIN { d = m / t - 1; if (d < 0) d = -d; exit !(d <= r) }'; }
ref_step_ms=$(awk -v f="$(term step_fixed_ms "$truth")" -v c="$(term step_per_context_ns "$truth")" \
	'BEGIN { print f + c * 128 * 1700 / 1e6 }')
seq_share=$(awk -v s="$(term fit.step_per_seq_us "$fit")" -v r="$ref_step_ms" \
	'BEGIN { d = s * 128 / 1e3 / r; if (d < 0) d = -d; print d }')
check "the fit is valid and unbounded after the calibration phase" \
	test "$(term valid "$fit") $(term bounded "$fit")" = "true false"
check "calibration measured the prompt-token time within 5% ($(term fit.prompt_token_us "$fit") us, true $(term prompt_token_us "$truth"))" \
	within "$(term fit.prompt_token_us "$fit")" "$(term prompt_token_us "$truth")" 0.05
check "  the fixed step within 5% ($(term fit.step_fixed_ms "$fit") ms, true $(term step_fixed_ms "$truth"))" \
	within "$(term fit.step_fixed_ms "$fit")" "$(term step_fixed_ms "$truth")" 0.05
check "  the per-context term within 5% ($(term fit.step_per_context_ns "$fit") ns, true $(term step_per_context_ns "$truth"))" \
	within "$(term fit.step_per_context_ns "$fit")" "$(term step_per_context_ns "$truth")" 0.05
check "  the per-sequence term, 0 in truth, within 5% of the reference step ($(term fit.step_per_seq_us "$fit") us x 128 = $seq_share of $ref_step_ms ms)" \
	awk -v s="$seq_share" 'BEGIN { exit !(s <= 0.05) }'
expect_eq "the cap was on the measured step under on" "$step_model_on" measured
expect_eq "  and on the policy's under advise" "$step_model_advise" assumed
check "reservation on (measured step): lat's p99 inter-token time is under the target ($on < $TARGET_MS ms)" \
	float_lt "$on" "$TARGET_MS"
check "reservation off: lat's p99 inter-token time is over ${TARGET_MS} ms (got $off ms)" \
	float_gt "$off" "$TARGET_MS"
check "the gateway's modeled step stayed within the target while on ($(books on 2) <= $TARGET_MS ms)" \
	float_le "$(books on 2)" "$TARGET_MS"
check "the flood was held to a smaller batch with the reservation ($running_on < $running_off running)" \
	float_lt "$running_on" "$running_off"
check "the flood still ran beside the reservation ($((flood_done1 - flood_done0)) settled)" \
	test "$((flood_done1 - flood_done0))" -gt 0
expect_eq "the reload without tpot_p99_ms lifted the reservation" "$tpot_after" null
for ph in on advise off; do
	expect_eq "lat ($ph): every request answered 200" \
		"$(jq -r '.tenants[0] | (.completed > 0 and .completed == (.status["200"] // 0))' "$PX_TMP/lat_$ph.json")" true
done
expect_eq "calibration streams: every request answered 200" \
	"$(jq -r '[.tenants[] | (.completed > 0 and .completed == (.status["200"] // 0))] | all' "$PX_TMP/calib.json")" true
# the flood's clients were stopped mid-answer: the agent ends those requests as it sees them go
for _ in $(seq 50); do no_leaked_reservations 2>/dev/null && break; sleep 0.1; done
check "no reservation left behind" no_leaked_reservations
px_stop_agent_clean
