#!/usr/bin/env bash
# proxy_workers.sh — agent.workers: 2. The agent starts two workers with one
# SO_REUSEPORT listener each; a burst of connections at once is spread by
# the kernel over both (each worker accepted some, and together all of
# them); a tenant's quota across the two is exact: of 24 requests sent at
# once on 24 connections, exactly as many are admitted as the bucket holds
# at their price (the rest answered 429), and it is billed exactly that;
# the other tenant on the same workers is untouched. Before that, requests
# one after another on new connections share one engine connection, which
# moves to the worker of each client in turn; large bodies sent by the
# worker without the lock arrive whole. Then the body check
# in parallel: 16 clients stream large bodies (20,000 token ids, ~120 KB)
# slowly and at once, so both workers read and check bodies during the
# same second (taking turns under the shared lock); every answer is right (exactly as
# many 200s as gamma's bucket holds, the rest 429) and gamma is billed
# exactly that. Keep-alive load over both workers leaves the buffered-bytes
# budget at exactly 0, and some of its requests were sent to the engine
# by the worker that did not own them. The agent exits cleanly (both threads joined, nothing
# leaked; under the ThreadSanitizer build, no race reported).
source "$(dirname "$0")/proxy_env.inc"

unset FG_E2E_WORKERS # this test names its own
px_netns workers 61
# beta: 0.5 units/s over a 2000 s burst = a 1000-unit bucket, which refills
# by less than a unit a second: whatever the burst's timing, the bucket
# admits floor(1000 / price) of them
# gamma: a bucket of 5.5 prices of a 20,000-token request (set below,
# once the price is known)
PX_RATE_B=0.5 PX_BURST_S=2000 px_policy "  workers: 2"
big_price=$(px_price 20000 10)
PX_RATE_C=$(awk -v p="$big_price" 'BEGIN { printf "%.6f", 5.5 * p / 2000 }')
PX_RATE_B=0.5 PX_BURST_S=2000 px_policy "  workers: 2"
px_start_sim --speedup 0 --output-len fixed
px_start_agent

check "the agent runs two workers" grep -q '2 workers, one SO_REUSEPORT listener each' "$PX_TMP/agent.log"
worker() { metric "fairgate_worker_connections_total{worker=\"$1\"}"; }
# burst NAME KEY [CURL_ARGS...] — the n requests $PX_TMP/NAME1..n at once,
# each on its own connection (answers in NAME.outI, statuses in NAME.codeI);
# one TAP line: every client got an answer
burst() {
	local name=$1 key=$2 i p failed=0 pids=()
	shift 2
	for i in $(seq 1 $n); do
		pc "$@" "$PX_URL/v1/completions" -H "Authorization: Bearer $key" \
			-H 'Content-Type: application/json' --data-binary "@$PX_TMP/$name$i" \
			-o "$PX_TMP/$name.out$i" -w '%{http_code}\n' >"$PX_TMP/$name.code$i" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || failed=$((failed + 1)); done
	expect_eq "$name: every client got an answer" "$failed" 0
}
codes() { cat "$PX_TMP/$1".code* | grep -c "^$2\$"; } # NAME STATUS: how many answered it

# an engine connection follows its client's worker: requests one after
# another, each on a new connection (spread by the kernel over the two
# workers), share one pooled engine connection, moved to the worker of
# the client that takes it; each 20,000-token body (~120 KB), sent to the
# engine by that worker without the shared lock, reaches it whole
c0=$(metric fairgate_engine_connects_total) m0=$(metric fairgate_engine_connection_moves_total)
s0=$(worker 0) s1=$(worker 1) whole=0 n=12
for i in $(seq 1 $n); do
	printf '{"prompt":[%s,%s],"max_tokens":10}' $((70000 + i)) "$(seq -s, 1 19999)" >"$PX_TMP/seq$i"
	pc "$PX_URL/v1/completions" -H "Authorization: Bearer $PX_KEY_A" -H 'Content-Type: application/json' \
		--data-binary "@$PX_TMP/seq$i" -o "$PX_TMP/seq.out$i"
	jq -e '.usage.prompt_tokens == 20000' "$PX_TMP/seq.out$i" >/dev/null && whole=$((whole + 1))
done
expect_eq "$n large bodies one after another reached the engine whole" "$whole" $n
s0=$(($(worker 0) - s0)) s1=$(($(worker 1) - s1))
moves=$(($(metric fairgate_engine_connection_moves_total) - m0))
connects=$(($(metric fairgate_engine_connects_total) - c0))
check "both workers took some of them ($s0 + $s1)" test "$s0" -gt 0 -a "$s1" -gt 0
check "the pooled engine connection moved between the workers ($moves times)" test "$moves" -gt 0
check "and was reused: $connects new engine connection(s) for $n requests" test "$connects" -ge 1 -a "$connects" -le 2
for w in 0 1; do
	held=$(metric "fairgate_worker_lock_held_seconds_total{worker=\"$w\"}")
	check "worker $w's time holding the shared lock is counted ($held s)" \
		awk -v h="$held" 'BEGIN { exit !(h > 0 && h < 600) }'
done

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
burst body "$PX_KEY_B"
expect_eq "exactly as many admitted as the bucket holds across both workers" "$(codes body 200)" "$want"
expect_eq "the rest refused 429" "$(codes body 429)" $((n - want))

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
# two workers checking bodies at once: 16 connections, each a distinct
# 20,000-token prompt (its first id differs: no prefix shared) sent at
# 100 KB/s, so every body arrives over about a second, read by read
n=16 big_want=5
w0=$(worker 0) w1=$(worker 1)
for i in $(seq 1 $n); do
	printf '{"prompt":[%s,%s],"max_tokens":10}' $((50000 + i)) "$(seq -s, 1 19999)" >"$PX_TMP/big$i"
done
burst big "$PX_KEY_C" --limit-rate 100k
expect_eq "large bodies checked in parallel: exactly as many admitted as gamma's bucket holds" \
	"$(codes big 200)" $big_want
expect_eq "large bodies: the rest refused 429" "$(codes big 429)" $((n - big_want))
answered=0
for i in $(seq 1 $n); do
	if grep -q '^200$' "$PX_TMP/big.code$i"; then
		jq -e '.usage.prompt_tokens == 20000' "$PX_TMP/big.out$i" >/dev/null && answered=$((answered + 1))
	elif jq -e '.error.code' "$PX_TMP/big.out$i" >/dev/null; then
		answered=$((answered + 1))
	fi
done
expect_eq "each answer is its own: the engine saw all 20,000 prompt tokens, or an OpenAI error" "$answered" $n
w0=$(($(worker 0) - w0)) w1=$(($(worker 1) - w1))
check "both workers took large bodies ($w0 + $w1)" test "$w0" -gt 0 -a "$w1" -gt 0
billed=$(tenant_field gamma units_billed)
check "gamma billed exactly $big_want x $big_price units ($billed)" \
	awk -v b="$billed" -v p="$big_price" -v n="$big_want" 'BEGIN { d = b - n * p; exit !(d > -0.01 && d < 0.01) }'
expect_eq "gamma: the refusals counted" "$(tenant_field gamma rejected)" $((n - big_want))

code=$(pc "$PX_URL/v1/completions" -H "Authorization: Bearer $PX_KEY_A" -H 'Content-Type: application/json' \
	--data-binary "@$PX_TMP/body1" -o /dev/null -w '%{http_code}')
expect_eq "alpha on the same workers is served" "$code" 200

# keep-alive load over both workers: 8 clients at once, each 30 requests
# on one connection, small and ~120 KB bodies in turn, so requests taken
# whole, bodies read alone and answers relayed meet in the same moments;
# every one is served, and once they are done the buffered-bytes budget
# is back at exactly 0 (a worker's compare-and-swap on it and another's
# update under the lock lose nothing)
n=8 per=30 pids=()
for j in $(seq 1 $n); do
	args=()
	for k in $(seq 1 $per); do
		f=body$(((j + k) % 24 + 1))
		[ $((k % 2)) -eq 0 ] && f=seq$(((j + k) % 12 + 1))
		[ "$k" -gt 1 ] && args+=(--next)
		args+=(--max-time 30 -H "Authorization: Bearer $PX_KEY_A" -H 'Content-Type: application/json'
			--data-binary "@$PX_TMP/$f" -o /dev/null -w '%{http_code}\n' "$PX_URL/v1/completions")
	done
	pc "${args[@]}" >"$PX_TMP/load.code$j" &
	pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done # not the agent's and the engine's
expect_eq "keep-alive load: all $((n * per)) requests served" "$(codes load 200)" $((n * per))
expect_eq "the buffered-bytes budget is back at 0" "$(metric fairgate_buffered_bytes)" 0
# a worker's pump dispatches requests of the other's clients too; while
# that worker's thread may sleep, the dispatcher sends them after its own
# pass without the lock (proxy_upstream.c, "send queues"): with 8 clients
# at once over two workers some always are
others=0
for w in 0 1; do
	others=$((others + $(metric "fairgate_worker_engine_sends_total{worker=\"$w\",for=\"others\"}")))
done
check "some requests were sent by a worker for the other's connections ($others)" test "$others" -gt 0

px_stop_agent_clean
