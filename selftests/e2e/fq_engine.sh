#!/usr/bin/env bash
# fq_engine.sh — the agent reads the engine's own metrics: fairgate-sim with
# a KV pool far smaller than the policy's (so the gateway's ledger lets too
# much in and the engine must preempt) shows preemptions, which the agent
# turns into fairgate_engine_preemptions_total and a log line; the engine's
# waiting count reaches the status; a dead engine shows as scrape failures.
source "$(dirname "$0")/fq_env.inc"

fq_netns engine 23
fq_policy '  standard: {weight: 1, max_context: 32768, kv_cap_tokens: 131072, burst_s: 60, max_queue_s: 30, priority: 0}' \
'  - {name: alpha, tier: standard, units_per_s: 1000000, keys: ["KEY_A"], cache: shared}'
px_start_sim --speedup 20 --kv-pool-tokens 4096 --max-model-len 4096
px_start_agent
for _ in $(seq 30); do [ "$(metric fairgate_engine_metrics_up)" = 1 ] && break; sleep 0.1; done
expect_eq "engine metrics scraped" "$(metric fairgate_engine_metrics_up)" 1
expect_eq "no preemption yet" "$(metric fairgate_engine_preemptions_total)" 0

# 4 x (1,000 prompt + 1,500 output) = 10,000 KV tokens on a 4,096-token pool
pids=()
for i in 1 2 3 4; do
	fq_body "$PX_TMP/b.$i" 1000 1500 "" $((i * 10000))
	fq_post $PX_KEY_A "$PX_TMP/b.$i" -o /dev/null -w '%{http_code}\n' >"$PX_TMP/c.$i" &
	pids+=($!)
done
wait "${pids[@]}"
expect_eq "all four served (the engine recomputed what it preempted)" "$(cat "$PX_TMP"/c.* | sort -u)" 200
engine=$(sim_metric vllm:num_preemptions_total)
check "the engine preempted ($engine)" test "$engine" -ge 1
for _ in $(seq 30); do [ "$(metric fairgate_engine_preemptions_total)" = "$engine" ] && break; sleep 0.1; done
expect_eq "fairgate_engine_preemptions_total follows vllm:num_preemptions_total" \
	"$(metric fairgate_engine_preemptions_total)" "$engine"
check "and a log line says so" grep -q "the engine preempted .* recompute is the platform's cost" "$PX_TMP/agent.log"
expect_eq "status shows them" "$(sched engine.preemptions)" "$engine"
check "billing is for what was asked, not the recompute (units <= 4 x the price of 1000 in / 1500 out)" \
	float_le "$(metric 'fairgate_tenant_units_total{tenant="alpha"}')" \
	"$(awk -v p="$(px_price 1000 1500)" 'BEGIN { print 4 * p + 0.01 }')"

fails=$(metric fairgate_engine_scrape_failures_total)
px_stop_sim
sleep 2.5
check "engine gone: scrape failures counted ($fails -> $(metric fairgate_engine_scrape_failures_total))" \
	float_gt "$(metric fairgate_engine_scrape_failures_total)" "$fails"
for _ in $(seq 30); do [ "$(metric fairgate_engine_metrics_up)" = 0 ] && break; sleep 0.1; done
expect_eq "  and its metrics are no longer trusted" "$(metric fairgate_engine_metrics_up)" 0
check "no reservation left behind" no_leaked_reservations
px_stop_agent_clean
