#!/usr/bin/env bash
# fq_stream.sh — streamed and non-streamed requests share the replica by
# contract, not by client concurrency: fairgated in front of fairgate-sim at
# real speed (a 24-sequence batch), two tenants with contracts larger than the
# replica, the same request shape (~100-token prompts, 100-token answers):
#   streams: streamed, 32 connections;
#   whole:   not streamed (no first-token signal), 64 connections.
# Equal weights: each is billed 45-55% over 28 s. Then a reload gives the
# streams' tier weight 2: 62-72% (2/3 +- 5 points) over 22 s. Throughout, the
# engine's own vllm:num_requests_waiting (sampled every 100 ms from the sim)
# stays at or under the gateway's limit, and the gap between the two virtual
# counters (sampled every second) stays inside the bound the README states.
# Before issue #20 a timer marked a
# non-streamed request started while it still waited in the engine, so the
# engine's queue filled with the busier client's requests and the shares
# followed concurrency.
source "$(dirname "$0")/fq_env.inc"

fq_netns stream 26
tiers() {
	echo "  standard: {weight: 1, max_context: 32768, kv_cap_tokens: 600000, burst_s: 60, max_queue_s: 120, priority: 0}
  gold: {weight: $1, max_context: 32768, kv_cap_tokens: 600000, burst_s: 60, max_queue_s: 120, priority: 0}"
}
tenants='  - {name: streams, tier: gold, units_per_s: 100000, keys: ["KEY_A"], cache: shared}
  - {name: whole, tier: standard, units_per_s: 100000, keys: ["KEY_B"], cache: shared}'
fq_policy "$(tiers 1)" "$tenants"
px_start_sim --max-num-seqs 24
px_start_agent

fq_load "$PX_TMP/streams.json" --closed --connections 32 --duration 66 --drain 20 \
	--tenant "streams:$PX_KEY_A:0:400:100:stream"
fq_load "$PX_TMP/whole.json" --closed --connections 64 --duration 66 --drain 20 --seed 2 \
	--tenant "whole:$PX_KEY_B:0:400:100"
sleep 8
fq_watch_waiting "$PX_TMP/waiting"
queued_s=$(tenant_field streams queued) queued_w=$(tenant_field whole queued)
read -r s0 w0 < <(fq_billed streams whole)
fq_gap_for 28
gap_equal=$gap
read -r s1 w1 < <(fq_billed streams whole)
equal=$(fq_share "$s0" "$s1" "$w0" "$w1")

fq_policy "$(tiers 2)" "$tenants"
pctl policy apply "$PX_TMP/policy.yaml" >"$PX_TMP/apply.out" 2>&1 ||
	tap_fail "policy reload" "$(cat "$PX_TMP/apply.out")"
sleep 6
read -r s2 w2 < <(fq_billed streams whole)
fq_gap_for 22
gap_weighted=$gap
read -r s3 w3 < <(fq_billed streams whole)
weighted=$(fq_share "$s2" "$s3" "$w2" "$w3")
weight_now=$(tenant_field streams weight)
fq_unwatch
fq_wait_loads

limit=$(sched engine_window.waiting_limit)
[ "$limit" = null ] && limit=8
maxw=$(fq_max "$PX_TMP/waiting")
echo "# equal weights, 28 s: streams billed $(awk -v a="$s0" -v b="$s1" 'BEGIN { print b - a }'), whole $(awk -v a="$w0" -v b="$w1" 'BEGIN { print b - a }'): streams $equal%"
echo "# streams at weight $weight_now, 22 s: streams billed $(awk -v a="$s2" -v b="$s3" 'BEGIN { print b - a }'), whole $(awk -v a="$w2" -v b="$w3" 'BEGIN { print b - a }'): streams $weighted%"
echo "# queued at the start: streams $queued_s, whole $queued_w; engine waiting max $maxw over $(fq_count "$PX_TMP/waiting") samples (limit $limit)"
# The bound (README "Fair queueing"): one prompt's charge (under 400 units:
# a prompt of 400 characters is at most that many tokens) plus what one
# tenant's requests in flight can still be charged, at most its connections'
# whole answers (64 x 100 output tokens x 3.12) for the non-streamed tenant,
# whose output is charged when it ends. Counters are units / weight, so the
# weight-2 phase is inside the same bound.
bound=$(awk 'BEGIN { print 400 + 64 * 100 * 3.12 }')
echo "# largest counter gap: equal weights $gap_equal units, weight 2 against 1 $gap_weighted units (bound $bound)"
check "both tenants were backlogged at the gateway (queued $queued_s and $queued_w)" \
	test "$queued_s" -gt 0 -a "$queued_w" -gt 0
check "equal weights: streams get 45-55% beside 2x the non-streamed concurrency (got $equal%)" \
	float_between "$equal" 45 55
expect_eq "the reload gave the streams' tier weight 2" "$weight_now" 2
check "weight 2 against 1: streams get 62-72% (got $weighted%)" float_between "$weighted" 62 72
check "the engine's waiting queue stayed at or under $limit (max $maxw)" float_le "$maxw" "$limit"
check "equal weights: the virtual counters stay within the bound ($gap_equal <= $bound units)" \
	float_le "$gap_equal" "$bound"
check "weight 2 against 1: the virtual counters stay within the bound ($gap_weighted <= $bound units)" \
	float_le "$gap_weighted" "$bound"
for t in streams whole; do
	expect_eq "$t: every request answered 200" \
		"$(jq -r '.tenants[0] | (.completed == (.status["200"] // 0))' "$PX_TMP/$t.json")" true
done
check "no reservation left behind" no_leaked_reservations
px_stop_agent_clean
