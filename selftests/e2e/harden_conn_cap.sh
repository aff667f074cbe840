#!/usr/bin/env bash
# harden_conn_cap.sh — issue #15 case 2: a connection cap below the fd limit.
# fairgated runs with nofile 1024; one client address opens 1,100 idle
# connections and holds them. A legitimate client from another address must
# still be served within 1 s, a new request from the hoarding address gets a
# clear HTTP answer (429/503, OpenAI's error shape) instead of silence, the
# log is not flooded with one accept error per attempt, and everything is
# served again once the hoard lets go. Then the total cap
# (agent.limits.max_connections; by default half the fds left after 64):
# past it every new client gets the same short 503, counted in /metrics.
source "$(dirname "$0")/harden_env.inc"

px_netns hdconn 151
LEGIT=10.250.151.4
ip -n "$PX_CNS" addr add "$LEGIT/24" dev px-c
px_policy "  timeouts: {header_s: 60, idle_s: 60}"
px_start_sim --speedup 0
hd_start_agent prlimit --nofile=1024:1024 --
req='{"messages":[{"role":"user","content":"hi"}],"max_tokens":4}'
legit() {
	ip netns exec "$PX_CNS" curl -sS --max-time "${1:-5}" --interface "$LEGIT" "$PX_URL/v1/chat/completions" \
		-H "Authorization: Bearer $PX_KEY_B" -H 'Content-Type: application/json' -d "$req" \
		-o "$PX_TMP/legit.json" -w '%{http_code} %{time_total}' 2>/dev/null
}
read -r code t <<<"$(legit)"
expect_eq "before: the legitimate client is served" "$code" 200
check "the default cap is half the fds left after 64: 480 of 1024, half of that per source" \
	grep -q 'client connections: at most 480 in all (from the fd limit), 240 per source address' "$PX_TMP/agent.log"

hd_hold 1100 ''
hd_wait_held 600 || { tap_fail "1,100 connections opened" "$(cat "$HD_HOLD_LOG")"; exit 1; }
expect_eq "1,100 idle connections are open from $PX_CLI" "$(hd_held)" 1100
sleep 1
log0=$(grep -c 'accept' "$PX_TMP/agent.log")
echo "# fairgated holds $(fd_count "$PX_AGENT_PID") fds (nofile 1024)"
read -r code t <<<"$(legit)"
check "a legitimate client from $LEGIT is served within 1 s (got ${code:-nothing} in ${t:-?} s)" \
	awk -v c="${code:-0}" -v t="${t:-99}" 'BEGIN { exit !(c == 200 && t < 1) }'
code=$(PX_CURL_TIMEOUT=3 chat $PX_KEY_A "$req" -o "$PX_TMP/over.json" -w '%{http_code}' 2>/dev/null)
check "a new request from the hoarding address gets 429 or 503 (got ${code:-nothing})" \
	bash -c "[[ '$code' == 429 || '$code' == 503 ]]"
check "... in OpenAI's error shape" bash -c "jq -e '.error.message and .error.type' '$PX_TMP/over.json' >/dev/null 2>&1"
for _ in $(seq 10); do legit 1 >/dev/null; done
lines=$(( $(grep -c 'accept' "$PX_TMP/agent.log") - log0 ))
check "the log is not flooded: $lines accept/overload lines for 11 more attempts (at most 3)" test "$lines" -le 3
echo "# last log lines: $(tail -3 "$PX_TMP/agent.log" | tr '\n' '|')"

kill -TERM "$HD_HOLD_PID"; wait "$HD_HOLD_PID" 2>/dev/null
sleep 1
read -r code t <<<"$(legit)"
expect_eq "after the hoard lets go: served again" "$code" 200
code=$(chat $PX_KEY_A "$req" -o /dev/null -w '%{http_code}')
expect_eq "after the hoard lets go: the hoarding address is served too" "$code" 200
check "no reservation left behind" no_leaked_reservations
px_stop_agent_clean

# the total cap, met by one source whose own cap is as high
px_policy "  timeouts: {header_s: 60, idle_s: 60}
  limits: {max_connections: 30, max_connections_per_source: 30}"
hd_start_agent -- --no-bpf
hd_hold 40 ''
hd_wait_held 300 || { tap_fail "40 connections opened" "$(cat "$HD_HOLD_LOG")"; exit 1; }
sleep 0.5
expect_eq "30 are held (fairgate_client_connections)" "$(metric fairgate_client_connections)" 30
read -r code t <<<"$(legit)"
expect_eq "past max_connections a client from another address gets 503" "$code" 503
check "  naming the limit" bash -c "jq -e '.error.code == \"overloaded\" and (.error.message | test(\"max_connections\"))' '$PX_TMP/legit.json' >/dev/null"
check "  counted by cap" test "$(metric 'fairgate_connections_refused_total{cap="total"}')" -ge 11
kill -TERM "$HD_HOLD_PID"; wait "$HD_HOLD_PID" 2>/dev/null
for _ in $(seq 30); do [ "$(metric fairgate_client_connections)" -le 1 ] && break; sleep 0.1; done
read -r code t <<<"$(legit)"
expect_eq "served once they go" "$code" 200
px_stop_agent_clean
