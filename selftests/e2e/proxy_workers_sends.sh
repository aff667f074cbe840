#!/usr/bin/env bash
# proxy_workers_sends.sh — agent.workers 2 and 4: requests one worker
# sends for another. A worker's pump dispatches requests of other workers'
# clients too; while the owner's thread may sleep, the dispatcher sends
# them itself after its own pass, without the shared lock, and a send
# that does not all go at once (a body larger than the sockets take in
# one call) goes back to the owner, which is woken to finish it
# (proxy_upstream.c, "send queues"). With each, 16 keep-alive clients at
# once send prompts of ~1.2 MB of token ids (the server namespace's TCP
# buffers capped at 256 KiB, so no such request goes in one call), in
# rounds until some such send was handed back (at most 8 rounds): every
# answer is 200 and the engine counted every prompt token of its request
# (a body cut, sent twice or mixed with another's would count otherwise),
# the buffered-bytes budget is back at 0, nothing stays reserved, and the
# agent exits cleanly (no leak; under the ThreadSanitizer build, no race
# reported).
source "$(dirname "$0")/proxy_env.inc"

unset FG_E2E_WORKERS # this test names its own
px_netns wsends 63
TOKENS=200000
# the server namespace's TCP buffers at most 256 KiB (per-namespace
# sysctls): a ~1.2 MB request to the engine then never goes in one call
ip netns exec "$PX_SNS" sysctl -q -w net.ipv4.tcp_wmem="4096 16384 262144" net.ipv4.tcp_rmem="4096 131072 262144"
policy() { # WORKERS
	cat >"$PX_TMP/policy.yaml" <<EOF
replica: {kv_pool_tokens: 40000000}
tiers:
  wide: {burst_s: 60, max_context: 1000000, kv_cap_tokens: 40000000, max_queue_s: 60, default_max_tokens: 4}
tenants:
  - name: alpha
    tier: wide
    units_per_s: 1000000000000
    keys: ["sha256:$(px_hash $PX_KEY_A)"]
agent:
  listen: 0.0.0.0:8000
  engine: 127.0.0.1:8001
  metrics_listen: 127.0.0.1:9464
  salt_secret_file: $PX_TMP/salt.key
  workers: $1
EOF
}
policy 2
px_start_sim --speedup 0 --output-len fixed --max-model-len 1000000

# distinct first ids: no prompt shares a prefix with another's
n=16 per=2
for j in $(seq 1 $n); do
	{
		printf '{"prompt":[%s,' $((90000 + j))
		yes 12345 | head -n $((TOKENS - 1)) | paste -sd,
		printf '],"max_tokens":4}'
	} | tr -d '\n' >"$PX_TMP/big$j"
done
size=$(stat -c %s "$PX_TMP/big1")
echo "# $n clients x $per requests of $size bytes a round"
sum() { # REGEX: the agent's metric lines whose series matches, summed
	ip netns exec "$PX_SNS" curl -sS --max-time 5 http://127.0.0.1:9464/metrics |
		awk -v m="$1" '$1 ~ m { s += $2 } END { print s + 0 }'
}
for w in 2 4; do
	policy $w
	px_start_agent
	check "workers $w: the agent runs $w workers" grep -q "$w workers, one SO_REUSEPORT listener each" "$PX_TMP/agent.log"
	rm -f "$PX_TMP"/code.* "$PX_TMP"/r*.*.*
	rounds=0 back=0
	while [ "$rounds" -lt 8 ] && [ "$back" -eq 0 ]; do
		rounds=$((rounds + 1))
		pids=()
		for j in $(seq 1 $n); do
			args=()
			for k in $(seq 1 $per); do
				[ "$k" -gt 1 ] && args+=(--next)
				args+=(--max-time 60 -H "Authorization: Bearer $PX_KEY_A" -H 'Content-Type: application/json'
					--data-binary "@$PX_TMP/big$j" -o "$PX_TMP/r$rounds.$j.$k" -w '%{http_code}\n'
					"$PX_URL/v1/completions")
			done
			pc "${args[@]}" >"$PX_TMP/code.$rounds.$j" &
			pids+=($!)
		done
		for p in "${pids[@]}"; do wait "$p"; done # not the agent's and the engine's
		back=$(sum '^fairgate_worker_engine_sends_handed_back_total[{]')
	done
	others=$(sum '^fairgate_worker_engine_sends_total[{].*for="others"')
	echo "# workers $w: $rounds round(s): $others request(s) sent by a worker for another's connections, $back handed back"
	check "workers $w: some requests were sent by a worker for another's connections ($others)" test "$others" -gt 0
	check "workers $w: some of those did not all go at once and went back to their owner ($back, in $rounds round(s))" \
		test "$back" -gt 0
	total=$((rounds * n * per))
	expect_eq "workers $w: all $total requests answered 200" "$(cat "$PX_TMP"/code.* | grep -c '^200$')" $total
	whole=0
	for f in "$PX_TMP"/r*.*.*; do
		jq -e --argjson t "$TOKENS" '.usage.prompt_tokens == $t' "$f" >/dev/null && whole=$((whole + 1))
	done
	expect_eq "workers $w: the engine counted all $TOKENS prompt tokens of every one" "$whole" $total
	expect_eq "workers $w: the buffered-bytes budget is back at 0" "$(metric fairgate_buffered_bytes)" 0
	check "workers $w: nothing left reserved" no_leaked_reservations
	px_stop_agent_clean
done
