#!/usr/bin/env bash
# proxy_engine_reset.sh — an engine that resets every connection right after
# its answer (fg-fake-engine --reset-after-answer: the answer says
# keep-alive, then a zero-linger close), with agent.workers 1 and 2. Each
# of 8 clients sends two requests pipelined in one write, so the second is
# dispatched at once to the engine connection the first just used, before
# or after its reset arrives: its send fails (with workers, the send after
# the worker's pass, without the lock) or its answer does, and it is tried
# once more on a fresh connection. Every request is answered 200, none is
# an engine failure, alpha is billed exactly its 16 requests, nothing stays
# reserved, and the agent exits cleanly.
source "$(dirname "$0")/meter_env.inc"

unset FG_E2E_WORKERS # this test names its own
px_netns reset 62
body='{"messages":[{"role":"user","content":"again"}],"max_tokens":4}'
req="POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer $PX_KEY_A\r\nContent-Type: application/json\r\nContent-Length: ${#body}\r\n\r\n$body"
# pair I — two requests in one write on one connection; the answers in pair.outI
pair() {
	ip netns exec "$PX_CNS" timeout 10 bash -c '
		exec 3<>/dev/tcp/'"$PX_SRV"'/8000 || exit 1
		printf "%b%b" "$1" "$1" >&3
		timeout 3 cat <&3' _ "$req" >"$PX_TMP/pair.out$1"
}
mt_start_fake --reset-after-answer
for workers in 1 2; do
	mt_policy "" "" "  workers: $workers"
	px_start_agent
	r0=$(metric fairgate_engine_retries_total) f0=$(metric fairgate_engine_failures_total)
	b0=$(tenant_field alpha units_billed)
	pids=()
	for i in $(seq 1 8); do
		pair "$i" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p"; done # not the agent's and the engine's
	ok=$(cat "$PX_TMP"/pair.out* | grep -ao 'HTTP/1.1 200' | wc -l)
	usage=$(cat "$PX_TMP"/pair.out* | grep -ao '"completion_tokens":4' | wc -l)
	expect_eq "workers $workers: 8 connections x 2 pipelined requests, all answered 200" "$ok" 16
	expect_eq "workers $workers: each answer the engine's" "$usage" 16
	retries=$(($(metric fairgate_engine_retries_total) - r0))
	failures=$(($(metric fairgate_engine_failures_total) - f0))
	echo "# workers $workers: $retries request(s) retried on a fresh engine connection"
	check "workers $workers: the reset connections were retried, not failed ($retries retries)" \
		test "$retries" -ge 1 -a "$retries" -le 16
	expect_eq "workers $workers: no engine failure" "$failures" 0
	billed=$(tenant_field alpha units_billed)
	# priced at the usage the engine reported (its prompt count)
	prompt=$(grep -ao '"prompt_tokens":[0-9]*' "$PX_TMP/pair.out1" | head -1 | cut -d: -f2)
	price=$(units "$prompt" 0 4)
	check "workers $workers: alpha billed exactly 16 requests (16 x $price)" \
		awk -v a="$b0" -v b="$billed" -v p="$price" 'BEGIN { d = b - a - 16 * p; exit !(d > -0.01 && d < 0.01) }'
	check "workers $workers: nothing left reserved" no_leaked_reservations
	rm -f "$PX_TMP"/pair.out*
	px_stop_agent_clean
done
