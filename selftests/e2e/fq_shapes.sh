#!/usr/bin/env bash
# fq_shapes.sh — request shape cannot buy replica time: fairgated in front
# of fairgate-sim at real speed, two tenants with equal contracts larger than
# the replica (so the fair queue alone decides), both backlogged:
#   prompts: ~1,200-token prompts (larger than the whole engine window of
#            2 steps = 792 prefill tokens), 8-token answers, streamed;
#   outputs: ~120-token prompts, 150-token streamed answers, six times the
#            client concurrency (four times the engine's batch).
# Over a 40 s window each is billed 45-55% of the replica time both were
# billed, the engine's own queue (vllm:num_requests_waiting, sampled every
# 100 ms from the sim) stays at or under the gateway's limit, and the gap
# between the two virtual counters stays inside the bound the README states.
# Before the window rule of issue #20 the long prompts only went when nothing
# else was pending, which a busy neighbour never allowed: ~0%.
source "$(dirname "$0")/fq_env.inc"

fq_netns shapes 25
fq_policy '  standard: {weight: 1, max_context: 32768, kv_cap_tokens: 600000, burst_s: 60, max_queue_s: 120, priority: 0}' \
'  - {name: prompts, tier: standard, units_per_s: 100000, keys: ["KEY_A"], cache: shared}
  - {name: outputs, tier: standard, units_per_s: 100000, keys: ["KEY_B"], cache: shared}'
px_start_sim --max-num-seqs 24
px_start_agent

fq_load "$PX_TMP/prompts.json" --closed --connections 16 --duration 52 --drain 20 \
	--tenant "prompts:$PX_KEY_A:0:4800:8:stream"
fq_load "$PX_TMP/outputs.json" --closed --connections 96 --duration 52 --drain 20 --seed 2 \
	--tenant "outputs:$PX_KEY_B:0:480:150:stream"
sleep 8 # both backlogged, the engine's batch full
fq_watch_waiting "$PX_TMP/waiting"
read -r p0 o0 < <(fq_billed prompts outputs)
queued_p=$(tenant_field prompts queued) queued_o=$(tenant_field outputs queued)
fq_gap_for 40
read -r p1 o1 < <(fq_billed prompts outputs)
fq_unwatch
fq_wait_loads

share=$(fq_share "$p0" "$p1" "$o0" "$o1")
limit=$(sched engine_window.waiting_limit)
[ "$limit" = null ] && limit=8
maxw=$(fq_max "$PX_TMP/waiting")
echo "# billed over 40 s: prompts $(awk -v a="$p0" -v b="$p1" 'BEGIN { print b - a }') units, outputs $(awk -v a="$o0" -v b="$o1" 'BEGIN { print b - a }') units; prompts' share $share%"
echo "# queued at the start of the window: prompts $queued_p, outputs $queued_o; engine waiting max $maxw over $(fq_count "$PX_TMP/waiting") samples (limit $limit); largest counter gap $gap units"
check "both tenants were backlogged at the gateway (queued $queued_p and $queued_o)" \
	test "$queued_p" -gt 0 -a "$queued_o" -gt 0
check "long prompts get 45-55% of the replica time (got $share%)" float_between "$share" 45 55
check "the engine's waiting queue stayed at or under $limit (max $maxw)" float_le "$maxw" "$limit"
# The bound (README "Fair queueing"): one prompt charge (1,200 units) plus
# what one tenant's requests in flight can still be charged (96 x 150 output
# tokens x 3.1); the counters must never drift apart by more.
bound=$(awk 'BEGIN { print 1250 + 96 * 150 * 3.12 }')
check "the virtual counters stay within the bound ($gap <= $bound units)" float_le "$gap" "$bound"
for t in prompts outputs; do
	expect_eq "$t: every request answered 200" \
		"$(jq -r '.tenants[0] | (.completed == (.status["200"] // 0))' "$PX_TMP/$t.json")" true
done
check "no reservation left behind" no_leaked_reservations
px_stop_agent_clean
