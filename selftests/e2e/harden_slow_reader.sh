#!/usr/bin/env bash
# harden_slow_reader.sh — issue #15 case 9: a client that reads a stream a
# little at a time must not hold its engine slot and KV reservation for
# ever. It reads 16 KiB a second, each read within idle_s of the last (so
# the older rule, no progress for idle_s, never fires): a 16,000-token
# stream (~3 MB of SSE) would take about three minutes. Both namespaces
# have small socket buffers (4 KiB on the client's side, 16 KiB on the
# server's), so the agent's relay buffer (256 KiB) fills and the engine is
# held back (fairgate-sim, as fast as possible, could finish in a second or
# two for a reader that keeps up). The write-stall rule: a relay buffer not
# taken below its low mark within idle_s (2 s here) ends the request. So
# within 20 s the engine slot, the KV reservation, the reservation and the
# in-flight count must be free, the tenant billed at most for what the
# engine produced (outcome client_stalled), and the agent's RSS not grown
# by more than a relay buffer's worth; the relay buffer is counted in the
# buffered-bytes budget (fairgate_buffered_bytes) while held. Once freed, the reader reads the
# rest at full speed (it has idle_s to do so before the agent closes the
# connection): what the agent had buffered, then a last SSE event
# with the error in OpenAI's shape (code client_too_slow), data: [DONE] and
# the last chunk, then the close.
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
	while [ ! -e "$0.fast" ]; do
		got=$(dd bs=16384 count=1 iflag=fullblock <&3 2>/dev/null | wc -c)
		n=$((n + got))
		[ "$got" -lt 16384 ] && break
		echo "$((SECONDS - s)) s: $n bytes" >"$0.progress"
		sleep 1
	done
	timeout 10 cat <&3 >"$0.tail"
	echo "eof after $n + $(wc -c <"$0.tail") bytes, $((SECONDS - s)) s"
	while :; do sleep 1; done' "$PX_TMP/slow" "$PX_SRV" "$PX_KEY_A" "$body"
reader=$SPAWNED_PID
running() { sim_metric 'vllm:num_requests_running'; }
sleep 1
held=$(metric fairgate_buffered_bytes)
sleep 1
echo "# 2 s in: engine running $(running), alpha in flight $(tenant_field alpha inflight), KV reserved $(tenant_field alpha kv_reserved_tokens), reserved $(tenant_field alpha reserved_units) units"
freed=
for i in $(seq 40); do
	r=$(running) f=$(tenant_field alpha inflight) kv=$(tenant_field alpha kv_reserved_tokens)
	if [ "$r" = 0 ] && [ "$f" = 0 ] && [ "$kv" = 0 ]; then freed=$((2 + i / 2)); break; fi
	sleep 0.5
done
touch "$PX_TMP/slow.fast" # the reader takes the rest at full speed now
for _ in $(seq 50); do grep -q '^eof' "$PX_TMP/slow.log" && break; sleep 0.2; done
echo "# reader: $(cat "$PX_TMP/slow.progress" "$PX_TMP/slow.log" 2>/dev/null | tr '\n' ' '); engine running $(running); alpha in flight $(tenant_field alpha inflight), KV reserved $(tenant_field alpha kv_reserved_tokens)"
check "the engine slot and the KV reservation are freed within 20 s of the slow read (freed after ${freed:-more than 22} s)" test -n "$freed"
check "no reservation left behind" no_leaked_reservations
check "the relay buffer counted in the buffered-bytes budget while it was full (${held:-?} bytes)" test "${held:-0}" -ge $((192 << 10))
expect_eq "  and released" "$(metric fairgate_buffered_bytes)" 0
check "the slow reader's stream has ended (the agent closed the connection)" grep -q '^eof' "$PX_TMP/slow.log"
last=$(tr -d '\r' <"$PX_TMP/slow.tail" | grep '^data: {"error"' | tail -1 | sed 's/^data: //')
echo "# last event: ${last:0:300}"
check "the stream's last event is an OpenAI-shaped error, code client_too_slow" \
	test "$(jq -r '.error | [(.message | type), .type, .code, (has("param"))] | join(",")' <<<"$last" 2>/dev/null)" = "string,server_error,client_too_slow,true"
check "then data: [DONE] and the chunked body's last chunk" \
	bash -c 'tail -c 40 "$1" | tr -d "\r" | tr "\n" "|" | grep -q "data: \[DONE\]|||0||$"' _ "$PX_TMP/slow.tail"
expect_eq "alpha's outcome is client_stalled" "$(pctl status --json | jq -r '.tenants[] | select(.name == "alpha") | .outcomes.client_stalled')" 1
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
