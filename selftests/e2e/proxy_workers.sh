#!/usr/bin/env bash
# proxy_workers.sh — agent.workers: 2. The agent starts two workers with one
# SO_REUSEPORT listener each; a burst of connections at once is spread by
# the kernel over both (each worker accepted some, and together all of
# them); a tenant's quota across the two is exact: of 24 requests sent at
# once on 24 connections, exactly as many are admitted as the bucket holds
# at their price (the rest answered 429), and it is billed exactly that;
# the other tenant on the same workers is untouched; the agent exits
# cleanly (both threads joined, nothing leaked).
source "$(dirname "$0")/proxy_env.inc"

unset FG_E2E_WORKERS # this test names its own
px_netns workers 61
# beta: 0.5 units/s over a 2000 s burst = a 1000-unit bucket, which refills
# by less than a unit a second: whatever the burst's timing, the bucket
# admits floor(1000 / price) of them
PX_RATE_B=0.5 PX_BURST_S=2000 px_policy "  workers: 2"
px_start_sim --speedup 0 --output-len fixed
px_start_agent

check "the agent runs two workers" grep -q '2 workers, one SO_REUSEPORT listener each' "$PX_TMP/agent.log"
worker() { metric "fairgate_worker_connections_total{worker=\"$1\"}"; }
# the start's port probe was a connection too
b0=$(worker 0) b1=$(worker 1)

price=$(px_price 100 10)
want=$(awk -v p="$price" 'BEGIN { printf "%d", 1000 / p }')
check "the price ($price units) fits a whole number of times with room for refill ($want)" \
	awk -v p="$price" -v n="$want" 'BEGIN { exit !(n >= 2 && 1000 - n * p < p - 20) }'

# 24 requests at once, each on its own connection; distinct prompts (token
# ids), so no prefix cache makes one cheaper than its reservation
n=24
for i in $(seq 1 $n); do
	first=$((i * 1000))
	printf '{"prompt":[%s],"max_tokens":10}' "$(seq -s, $first $((first + 99)))" >"$PX_TMP/body$i"
done
pids=()
for i in $(seq 1 $n); do
	pc "$PX_URL/v1/completions" -H "Authorization: Bearer $PX_KEY_B" -H 'Content-Type: application/json' \
		--data-binary "@$PX_TMP/body$i" -o /dev/null -w '%{http_code}\n' >"$PX_TMP/code$i" &
	pids+=($!)
done
failed=0
for p in "${pids[@]}"; do wait "$p" || failed=$((failed + 1)); done
expect_eq "every client got an answer" "$failed" 0
ok=$(cat "$PX_TMP"/code* | grep -c '^200$')
refused=$(cat "$PX_TMP"/code* | grep -c '^429$')
expect_eq "exactly as many admitted as the bucket holds across both workers" "$ok" "$want"
expect_eq "the rest refused 429" "$refused" $((n - want))

w0=$(($(worker 0) - b0)) w1=$(($(worker 1) - b1))
expect_eq "the two workers accepted all $n connections together ($w0 + $w1)" $((w0 + w1)) $n
check "worker 0 accepted some ($w0)" test "$w0" -gt 0
check "worker 1 accepted some ($w1)" test "$w1" -gt 0

billed=$(tenant_field beta units_billed)
check "beta billed exactly $want x $price units ($billed)" \
	awk -v b="$billed" -v p="$price" -v n="$want" 'BEGIN { d = b - n * p; exit !(d > -0.01 && d < 0.01) }'
expect_eq "beta: the refusals counted" "$(tenant_field beta rejected)" $((n - want))
level=$(tenant_field beta bucket_units)
check "beta's bucket is what is left (1000 - $want x $price + refill = $level)" \
	awk -v l="$level" -v p="$price" -v n="$want" 'BEGIN { r = 1000 - n * p; exit !(l >= r - 0.01 && l < p) }'
code=$(pc "$PX_URL/v1/completions" -H "Authorization: Bearer $PX_KEY_A" -H 'Content-Type: application/json' \
	--data-binary "@$PX_TMP/body1" -o /dev/null -w '%{http_code}')
expect_eq "alpha on the same workers is served" "$code" 200

px_stop_agent_clean
