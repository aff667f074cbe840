#!/usr/bin/env bash
# harden_slow_reader.sh — issue #15 case 9: a client that reads a stream a
# little at a time, each read within idle_s of the last, must not hold its
# engine slot and KV reservation for ever. (A byte per idle_s does not do it
# here: the agent drops a client whose socket takes nothing for idle_s
# (outcome client_gone), so the reader must empty the agent's send buffer,
# 32 KiB in this test, once per idle_s. It reads 16 KiB a second: the 3 MB
# stream would take about three minutes.) Both namespaces have small socket buffers (4 KiB on
# the client's side, 16 KiB on the server's), so past the agent's relay
# buffer (1 MiB today) the engine is held back; the engine (fairgate-sim, as
# fast as possible) could finish the 16,000-token stream (~3 MB of SSE) in a
# second or two for a reader that keeps up. Within 20 s (upstream_s 3, idle_s 2: the bound on
# a request's total time and its relay buffer is to come) the engine slot,
# the KV reservation, the reservation and the in-flight count must be free,
# the client's stream must have ended (the answer it gets is to be
# documented), the tenant billed at most for what the engine produced, and
# the agent's RSS not grown by more than a relay buffer's worth (this one
# holds today: 1.2 MB in the -O2 build; ASan's allocator makes it ~10 MB).
source "$(dirname "$0")/harden_env.inc"
hd_lean_asan

px_netns hdslow 158
ip netns exec "$PX_CNS" sysctl -qw net.ipv4.tcp_rmem="4096 4096 4096"
ip netns exec "$PX_SNS" sysctl -qw net.ipv4.tcp_rmem="4096 16384 16384" net.ipv4.tcp_wmem="4096 16384 16384"
px_policy "  timeouts: {header_s: 5, body_s: 5, idle_s: 2, upstream_s: 3}"
px_start_sim --speedup 0
px_start_agent
base=$(rss_kb "$PX_AGENT_PID")
body='{"messages":[{"role":"user","content":"a long story please"}],"max_tokens":16000,"stream":true}'
spawn "$PX_TMP/slow.log" ip netns exec "$PX_CNS" bash -c '
	exec 3<>"/dev/tcp/$1/8000" || exit 1
	printf "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" "$2" "${#3}" "$3" >&3
	n=0 s=$SECONDS
	while :; do
		got=$(dd bs=16384 count=1 iflag=fullblock <&3 2>/dev/null | wc -c)
		n=$((n + got))
		[ "$got" -lt 16384 ] && break
		echo "$((SECONDS - s)) s: $n bytes" >"$0.progress"
		sleep 1
	done
	echo "eof after $n bytes, $((SECONDS - s)) s"
	while :; do sleep 1; done' "$PX_TMP/slow" "$PX_SRV" "$PX_KEY_A" "$body"
reader=$SPAWNED_PID
running() { sim_metric 'vllm:num_requests_running'; }
sleep 2
echo "# 2 s in: engine running $(running), alpha in flight $(tenant_field alpha inflight), KV reserved $(tenant_field alpha kv_reserved_tokens), reserved $(tenant_field alpha reserved_units) units"
freed=
for i in $(seq 40); do
	r=$(running) f=$(tenant_field alpha inflight) kv=$(tenant_field alpha kv_reserved_tokens)
	if [ "$r" = 0 ] && [ "$f" = 0 ] && [ "$kv" = 0 ]; then freed=$((2 + i / 2)); break; fi
	sleep 0.5
done
echo "# reader: $(cat "$PX_TMP/slow.progress" "$PX_TMP/slow.log" 2>/dev/null | tr '\n' ' '); engine running $(running); alpha in flight $(tenant_field alpha inflight), KV reserved $(tenant_field alpha kv_reserved_tokens)"
check "the engine slot and the KV reservation are freed within 20 s of the slow read (freed after ${freed:-more than 22} s)" test -n "$freed"
check "no reservation left behind" no_leaked_reservations
check "the slow reader's stream has ended" grep -q '^eof' "$PX_TMP/slow.log"
grown=$(( $(rss_kb "$PX_AGENT_PID") - base ))
budget=4
grep -qa __asan_init "$FG_BUILD/fairgated" && budget=16 # its allocator's size classes and redzones
check "the agent's RSS grew by at most $budget MiB for the one slow stream (${grown} kB)" test "$grown" -le $((budget << 10))
billed=$(metric 'fairgate_tenant_units_total{tenant="alpha"}')
full=$(px_price 64 16000)
check "alpha billed at most what 16,000 tokens cost (${billed:-?} <= $full)" float_le "${billed:-0}" "$full"
echo "# alpha outcomes: $(pctl status --json | jq -c ".tenants[0].outcomes")"; echo "# agent log: $(tail -4 "$PX_TMP/agent.log" | tr "\n" "|")"
kill -TERM "$reader" 2>/dev/null
px_stop_agent_clean
