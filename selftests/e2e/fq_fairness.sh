#!/usr/bin/env bash
# fq_fairness.sh — fairness through the real proxy: fairgate-sim at 10x
# speed, a steady tenant (one request at a time, short prompts) and a bursty
# one (200 long prompts at once). Straight into the engine (FCFS) the steady
# tenant waits behind the whole burst; through fairgated the fair queue and
# the shallow engine window put it next, so its latency stays close to what
# it sees alone. The steady tenant sends 10 requests/s (open loop) while the
# burst is being served, so its percentiles describe the burst.
source "$(dirname "$0")/fq_env.inc"

fq_netns fair 24
fq_policy '  standard: {weight: 1, max_context: 32768, kv_cap_tokens: 600000, burst_s: 60, max_queue_s: 60, priority: 0}' \
'  - {name: steady, tier: standard, units_per_s: 100000, keys: ["KEY_A"], cache: shared}
  - {name: bursty, tier: standard, units_per_s: 100000, keys: ["KEY_B"], cache: shared}'
px_start_sim --speedup 10
px_start_agent

# load TARGET NS OUT TENANT_ARGS... — fg-load from a namespace
load() {
	local target=$1 ns=$2 out=$3; shift 3
	ip netns exec "$ns" "$FG_BUILD/fg-load" --target "$target" --drain 30 --timeout 60 "$@" >"$out" 2>"$out.err"
}
steady() { # TARGET NS OUT
	load "$1" "$2" "$3" --connections 8 --duration 2 --tenant "steady:$PX_KEY_A:10:2000:16:stream"
}
burst() { # TARGET NS OUT
	load "$1" "$2" "$3" --connections 200 --requests 200 --duration 2 --seed 3 \
		--tenant "bursty:$PX_KEY_B:400:16000:50:stream"
}
p50() { jq -r '.tenants[0].latency_ms.p50' "$1"; }
worst() { jq -r '.tenants[0].latency_ms.max' "$1"; }

steady "$PX_SRV:8000" "$PX_CNS" "$PX_TMP/alone.json"
burst "$PX_SRV:8000" "$PX_CNS" "$PX_TMP/burst1.json" & bp=$!
sleep 0.3
steady "$PX_SRV:8000" "$PX_CNS" "$PX_TMP/gw.json"
wait $bp
burst 127.0.0.1:8001 "$PX_SNS" "$PX_TMP/burst2.json" & bp=$!
sleep 0.3
steady 127.0.0.1:8001 "$PX_SNS" "$PX_TMP/direct.json"
wait $bp

alone=$(p50 "$PX_TMP/alone.json") gw=$(p50 "$PX_TMP/gw.json")
gw_max=$(worst "$PX_TMP/gw.json") direct_max=$(worst "$PX_TMP/direct.json")
echo "# steady tenant latency (ms): alone p50 $alone max $(worst "$PX_TMP/alone.json"); with the burst through fairgated p50 $gw max $gw_max; straight into the engine p50 $(p50 "$PX_TMP/direct.json") max $direct_max"
expect_eq "the burst was served through fairgated" "$(jq -r '.tenants[0].status["200"] // 0' "$PX_TMP/burst1.json")" 200
expect_eq "every steady request served through fairgated" \
	"$(jq -r '.tenants[0].status["200"] // 0' "$PX_TMP/gw.json")" "$(jq -r '.tenants[0].sent' "$PX_TMP/gw.json")"
check "through fairgated the burst costs the steady tenant little (p50 $gw ms <= 4 x alone $alone ms + 100)" \
	float_le "$gw" "$(awk -v a="$alone" 'BEGIN { print 4 * a + 100 }')"
direct=$(p50 "$PX_TMP/direct.json")
check "straight into the engine it waits behind the burst (p50 $direct ms >= 4 x $gw ms through fairgated)" \
	float_le "$(awk -v g="$gw" 'BEGIN { print 4 * g }')" "$direct"
check "no reservation left behind" no_leaked_reservations
px_stop_agent_clean
