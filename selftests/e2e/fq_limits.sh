#!/usr/bin/env bash
# fq_limits.sh — memory isolation and context limits seen from clients,
# through the real fairgated and two fairgate-sim engines:
#   tier max_context       -> 400 context_length_exceeded naming the tier
#   alone above the KV cap -> 400 naming the cap (x-should-retry: false)
#   over the KV cap        -> the request waits in the queue, then proceeds
#   above long_context.threshold -> forwarded to the long-context pool (the
#                            second sim serves it), or 400 naming the pool
#                            when none is configured
#   engine priority        -> stripped under engine_scheduling: fcfs (the sim
#                            rejects any non-zero priority under fcfs), set
#                            from the tier under priority
source "$(dirname "$0")/fq_env.inc"

fq_netns limits 21
TIERS='  small: {weight: 1, max_context: 4096, kv_cap_tokens: 6000, burst_s: 60, max_queue_s: 30, priority: 5, default_max_tokens: 64}
  big: {weight: 2, max_context: 131072, kv_cap_tokens: 262144, burst_s: 60, max_queue_s: 30, priority: 1, default_max_tokens: 64}'
TENANTS='  - {name: smallco, tier: small, units_per_s: 100000, keys: ["KEY_A"], cache: shared}
  - {name: bigco, tier: big, units_per_s: 100000, keys: ["KEY_B"], cache: shared}'
LC='  long_context: {threshold: 16384, upstream: 127.0.0.1:8002}'
fq_policy "$TIERS" "$TENANTS" "$LC"
"$FG_BUILD/fairgatectl" policy check "$PX_TMP/policy.yaml" >"$PX_TMP/check.out" 2>&1 ||
	{ tap_fail "policy check" "$(cat "$PX_TMP/check.out")"; exit 1; }
px_start_sim --speedup 1
fq_sim2 --speedup 0 --scheduling-policy priority
px_start_agent
served1() { sim_metric vllm:request_success_total; }

# ---- tier max_context ----
fq_body "$PX_TMP/ctx" 4000 200
before=$(served1)
code=$(fq_post $PX_KEY_A "$PX_TMP/ctx" -D "$PX_TMP/h" -o "$PX_TMP/b" -w '%{http_code}')
expect_eq "above tier max_context: 400" "$code" 400
expect_eq "  code context_length_exceeded" "$(jq -r .error.code "$PX_TMP/b")" context_length_exceeded
check "  the message names the tier and its limit ($(jq -r .error.message "$PX_TMP/b"))" \
	grep -q "4096-token maximum of tier 'small'" "$PX_TMP/b"
check "  x-should-retry: false" grep -qi '^x-should-retry: false' "$PX_TMP/h"
expect_eq "  the engine never saw it" "$(served1)" "$before"

# ---- alone above the tenant's KV cap: n x (prompt + max output) = 2 x 3100 > 6000 ----
fq_body "$PX_TMP/kvn" 3000 100 '"n":2'
code=$(fq_post $PX_KEY_A "$PX_TMP/kvn" -D "$PX_TMP/h" -o "$PX_TMP/b" -w '%{http_code}')
expect_eq "alone above the KV cap: 400" "$code" 400
check "  the message names the cap ($(jq -r .error.message "$PX_TMP/b"))" \
	grep -q "per-tenant KV cap of 6000 tokens" "$PX_TMP/b"
check "  x-should-retry: false" grep -qi '^x-should-retry: false' "$PX_TMP/h"
expect_eq "  counted as kv_never" "$(tenant_field smallco outcomes.kv_never)" 1

# ---- over the cap: three requests of 2,600 KV tokens, two fit in 6,000 ----
fq_body "$PX_TMP/kv" 2500 100
pids=()
for i in 1 2 3; do
	fq_post $PX_KEY_A "$PX_TMP/kv" -o /dev/null -w '%{http_code} %{time_total}\n' >"$PX_TMP/kv.$i" &
	pids+=($!)
	sleep 0.05
done
sleep 0.15
snap=$(pctl status --json) # one snapshot: fairgatectl under ASan takes ~0.3 s
kv_now=$(jq -r '.tenants[] | select(.name == "smallco") | .kv_reserved_tokens' <<<"$snap")
q_now=$(jq -r '.tenants[] | select(.name == "smallco") | .queued' <<<"$snap")
wait "${pids[@]}"
expect_eq "while two run, their KV is reserved (2 x 2600)" "$kv_now" 5200
expect_eq "  and the third waits in the queue" "$q_now" 1
codes=$(cut -d' ' -f1 "$PX_TMP"/kv.? | sort | uniq -c | awk '{ print $1 "x" $2 }')
expect_eq "  then all three are served" "$codes" 3x200
t1=$(cut -d' ' -f2 "$PX_TMP/kv.1") t3=$(cut -d' ' -f2 "$PX_TMP/kv.3")
check "  the third finished after the first had released its KV (${t3}s > ${t1}s + 0.3s)" \
	float_gt "$t3" "$(awk -v t="$t1" 'BEGIN { print t + 0.3 }')"
expect_eq "  KV released" "$(tenant_field smallco kv_reserved_tokens)" 0

# ---- long context: 20,000 + 8 > threshold 16,384 -> the second sim ----
fq_body "$PX_TMP/long" 20000 8
b1=$(served1) b2=$(sim2_metric vllm:request_success_total)
code=$(fq_post $PX_KEY_B "$PX_TMP/long" -o "$PX_TMP/b" -w '%{http_code}')
expect_eq "long context: 200" "$code" 200
expect_eq "  served by the long-context pool (second sim)" "$(sim2_metric vllm:request_success_total)" $((b2 + 1))
expect_eq "  not by the main engine" "$(served1)" "$b1"
expect_eq "  usage says 20000 prompt tokens" "$(jq -r .usage.prompt_tokens "$PX_TMP/b")" 20000
expect_eq "  counted" "$(tenant_field bigco long_context)" 1

# ---- priority: fcfs engine, a client's own priority never reaches it ----
chat_b() { pc "$PX_URL/v1/chat/completions" -H "Authorization: Bearer $PX_KEY_B" -d "$1" "${@:2}"; }
code=$(chat_b '{"messages":[{"role":"user","content":"hi"}],"max_tokens":4,"priority":7}' -o "$PX_TMP/b" -w '%{http_code}')
expect_eq "engine_scheduling fcfs: client priority stripped (the fcfs sim accepts it)" "$code" 200
direct=$(sim_direct http://127.0.0.1:8001/v1/chat/completions -d '{"messages":[{"role":"user","content":"hi"}],"max_tokens":4,"priority":7}' -o /dev/null -w '%{http_code}')
expect_eq "  (sent straight to the fcfs sim, the same body is refused)" "$direct" 400

apply() { pctl policy apply "$PX_TMP/policy.yaml" >"$PX_TMP/apply.out" 2>&1 || cat "$PX_TMP/apply.out" >&2; }
fq_policy "$TIERS" "$TENANTS" "$LC
  engine_scheduling: priority"
apply
code=$(chat_b '{"messages":[{"role":"user","content":"hi"}],"max_tokens":4}' -o "$PX_TMP/b" -w '%{http_code}')
expect_eq "engine_scheduling priority, engine still fcfs: the engine refuses the tier's priority" "$code" 400
check "  because the agent set priority ($(jq -r .error.message "$PX_TMP/b"))" grep -q 'priority' "$PX_TMP/b"
fq_policy "$TIERS" "$TENANTS" "$LC
  engine_scheduling: priority" 
sed -i 's/engine: 127.0.0.1:8001/engine: 127.0.0.1:8002/' "$PX_TMP/policy.yaml"
apply
code=$(chat_b '{"messages":[{"role":"user","content":"hi"}],"max_tokens":4,"priority":-50}' -o "$PX_TMP/b" -w '%{http_code}')
expect_eq "priority engine (second sim): served with the tier's priority" "$code" 200

# ---- no long-context pool: 400 naming the pool ----
fq_policy "$TIERS" "$TENANTS" "  long_context: {threshold: 16384}"
apply
code=$(fq_post $PX_KEY_B "$PX_TMP/long" -D "$PX_TMP/h" -o "$PX_TMP/b" -w '%{http_code}')
expect_eq "long context without a pool: 400" "$code" 400
check "  the message names the pool ($(jq -r .error.message "$PX_TMP/b"))" \
	grep -q "16384-token threshold of this pool, and no long-context pool is configured" "$PX_TMP/b"
expect_eq "  code context_length_exceeded" "$(jq -r .error.code "$PX_TMP/b")" context_length_exceeded
check "no reservation left behind" no_leaked_reservations
expect_eq "no KV left reserved on the node" "$(sched kv.reserved_tokens)" 0
px_stop_agent_clean
