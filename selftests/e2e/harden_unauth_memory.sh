#!/usr/bin/env bash
# harden_unauth_memory.sh — issue #15 case 1: no unauthenticated client can
# make fairgated hold memory. fairgated runs in a memory cgroup (256 MiB: the
# DaemonSet's 1 GiB scaled down with the attack); keyless clients declare
# bodies just under max_body_bytes and stall, and the agent must answer them
# at their headers (401, no 100 Continue, no body read or reserved), stay
# alive, keep its RSS within a budget above its baseline, and keep serving a
# tenant with a key. Then the buffered-bytes budget (agent.limits.
# max_buffered_bytes, by default half the cgroup's limit): clients with keys
# holding bodies fill it, a new body gets 503 in OpenAI's shape while a
# stream already running finishes, and the bytes are released when they go.
source "$(dirname "$0")/harden_env.inc"
hd_lean_asan

HD_LIMIT=$((256 << 20)) HD_BUDGET_KB=$((64 << 10)) HD_CONNS=${HD_CONNS:-48}
px_netns hdmem 150
# long body and header deadlines: the stall lasts the whole test, as an
# attacker's would with the shipped defaults (body_s 30)
px_policy "  timeouts: {header_s: 60, body_s: 60, idle_s: 60}"
px_start_sim --speedup 0
if ! hd_memcg "$HD_LIMIT"; then
	tap_skip "unauthenticated memory" "no usable memory cgroup (v2 with memory, or v1 memory)"
	exit 0
fi
echo "# memory cgroup ($HD_CG_KIND): $HD_CG, limit $((HD_LIMIT >> 20)) MiB"
hd_start_agent cg
check "without agent.limits.max_buffered_bytes the budget is half the cgroup's limit" \
	grep -q "request bodies held: at most $((HD_LIMIT / 2)) bytes in all (half the memory cgroup" "$PX_TMP/agent.log"
ok_chat() { chat $PX_KEY_A '{"messages":[{"role":"user","content":"hi"}],"max_tokens":4}' -o /dev/null -w '%{http_code}'; }
expect_eq "before: alpha is served" "$(ok_chat)" 200
base=$(rss_kb "$PX_AGENT_PID")
echo "# baseline RSS ${base} kB"

# Expect: 100-continue without a key: the answer is 401, not an invitation
# to send the body
first=$(raw 'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\nExpect: 100-continue\r\n\r\n' 2 | status_of)
expect_eq "keyless POST with Expect: 100-continue is answered 401 (no 100 Continue before the key)" "${first:-nothing}" 401
# no Expect, no body sent: the headers alone decide
first=$(raw 'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 8388607\r\n\r\n' 2 | status_of)
expect_eq "keyless POST declaring 8 MiB is answered 401 at its headers, within 2 s" "${first:-nothing}" 401
first=$(raw "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-nobody\r\nContent-Length: 8388607\r\nExpect: 100-continue\r\n\r\n" 2 | status_of)
expect_eq "unknown key with Expect: 100-continue: 401, no 100 Continue" "${first:-nothing}" 401

# the attack: each connection declares 8 MiB - 1, sends all but the last
# byte (or what the agent takes within 10 s) and stalls
body=$((8388607))
spawn "$PX_TMP/attack.log" ip netns exec "$PX_CNS" bash -c '
	ulimit -n 4096
	fds=()
	for ((i = 0; i < $1; i++)); do
		exec {fd}<>"/dev/tcp/$2/8000" || break
		printf "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" "$3" >&$fd
		timeout 10 head -c $(($3 - 1)) /dev/zero >&$fd 2>/dev/null
		fds+=("$fd")
	done
	echo "sent ${#fds[@]}"
	while :; do sleep 1; done' _ "$HD_CONNS" "$PX_SRV" "$body"
attacker=$SPAWNED_PID
peak=$base
for _ in $(seq 1200); do # at most 2 min
	r=$(rss_kb "$PX_AGENT_PID")
	[ -n "$r" ] && [ "$r" -gt "$peak" ] && peak=$r
	alive "$PX_AGENT_PID" || break
	grep -q '^sent' "$PX_TMP/attack.log" && break
	sleep 0.1
done
echo "# attack: $(cat "$PX_TMP/attack.log"); peak RSS ${peak} kB"
check "fairgated survives $HD_CONNS stalled keyless 8 MiB bodies under a $((HD_LIMIT >> 20)) MiB cgroup" alive "$PX_AGENT_PID"
if [ "$HD_CG_KIND" = v1 ]; then
	echo "# cgroup: failcnt $(cat "$HD_CG/memory.failcnt" 2>/dev/null) max_usage $(( $(cat "$HD_CG/memory.max_usage_in_bytes" 2>/dev/null || echo 0) >> 20 )) MiB oom_kill $(awk '$1 == "oom_kill" { print $2 }' "$HD_CG/memory.oom_control" 2>/dev/null)"
fi
check "RSS stays within ${HD_BUDGET_KB} kB of the baseline (peak ${peak} kB, baseline ${base} kB)" \
	test "$peak" -le $((base + HD_BUDGET_KB))
expect_eq "alpha is still served while they stall" "$(ok_chat 2>/dev/null)" 200
kill -KILL "$attacker" 2>/dev/null
if alive "$PX_AGENT_PID"; then
	check "no reservation left behind" no_leaked_reservations
	px_stop_agent_clean
fi

# the buffered-bytes budget: with a key, bodies are held only up to
# agent.limits.max_buffered_bytes in all; past it new bodies get 503 while a
# stream already running keeps flowing
px_policy "  timeouts: {header_s: 60, body_s: 60, idle_s: 60}
  max_body_bytes: 1048576
  limits: {max_buffered_bytes: 2097152}"
kill -TERM "$PX_SIM_PID"; wait "$PX_SIM_PID" 2>/dev/null
px_start_sim --speedup 1
hd_start_agent -- --no-bpf
check "the budget is logged at start" grep -q 'request bodies held: at most 2097152 bytes in all (agent.limits.max_buffered_bytes)' "$PX_TMP/agent.log"
chat $PX_KEY_B '{"messages":[{"role":"user","content":"tell me a long story"}],"max_tokens":300,"stream":true}' \
	-o "$PX_TMP/stream.out" -w '%{http_code}' >"$PX_TMP/stream.code" &
streamer=$!
on_exit "kill $streamer 2>/dev/null"
# two keyed clients hold 900,000 bytes each of a 1,000,000-byte body
spawn "$PX_TMP/hold2.log" ip netns exec "$PX_CNS" bash -c '
	fds=()
	for i in 1 2; do
		exec {fd}<>"/dev/tcp/$1/8000" || break
		printf "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n" "$2" >&$fd
		head -c 900000 /dev/zero >&$fd
		fds+=("$fd")
	done
	echo "sent ${#fds[@]}"
	while :; do sleep 1; done' _ "$PX_SRV" "$PX_KEY_A"
holder=$SPAWNED_PID
# (a keyed client's declared length is reserved, and counted, at its head;
# the stream, while it runs, adds its rewritten head and relay buffer,
# under 64 KiB: on a loaded machine it can still be running here)
for _ in $(seq 100); do [ "$(metric fairgate_buffered_bytes)" = 2000000 ] && break; sleep 0.1; done
held=$(metric fairgate_buffered_bytes)
check "the agent counts the two bodies' declared room ($held: 2,000,000 and the stream's < 64 KiB)" \
	test "$held" -ge 2000000 -a "$held" -lt $((2000000 + 65536))
# 400,000 bytes, most of them JSON whitespace (few tokens)
{ printf '{"messages":[{"role":"user","content":"hi"}],'; head -c 400000 /dev/zero | tr '\0' ' '; printf '"max_tokens":2}'; } >"$PX_TMP/big.json"
r=$(pc "$PX_URL/v1/chat/completions" -H "Authorization: Bearer $PX_KEY_C" -H 'Content-Type: application/json' \
	--data-binary @"$PX_TMP/big.json" -o "$PX_TMP/503.json" -w '%{http_code}')
expect_eq "a third body past the budget: 503" "$r" 503
check "  in OpenAI's shape (server_error, overloaded)" \
	bash -c "jq -e '.error.type == \"server_error\" and .error.code == \"overloaded\" and (.error.message | test(\"max_buffered_bytes\"))' '$PX_TMP/503.json' >/dev/null"
check "  counted" test "$(metric fairgate_over_budget_total)" -ge 1
r=$(chat $PX_KEY_C '{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}' -o /dev/null -w '%{http_code}')
expect_eq "a small request still fits: 200" "$r" 200
wait "$streamer"
expect_eq "the stream running meanwhile ended 200" "$(cat "$PX_TMP/stream.code")" 200
check "  and complete" grep -q 'data: \[DONE\]' "$PX_TMP/stream.out"
kill -KILL "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
for _ in $(seq 50); do [ "$(metric fairgate_buffered_bytes)" = 0 ] && break; sleep 0.1; done
expect_eq "their bodies are released when they go" "$(metric fairgate_buffered_bytes)" 0
r=$(pc "$PX_URL/v1/chat/completions" -H "Authorization: Bearer $PX_KEY_C" -H 'Content-Type: application/json' \
	--data-binary @"$PX_TMP/big.json" -o /dev/null -w '%{http_code}')
expect_eq "then the big body is served" "$r" 200
check "no reservation left behind" no_leaked_reservations
px_stop_agent_clean
