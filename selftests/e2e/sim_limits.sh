#!/usr/bin/env bash
# sim_limits.sh — fairgate-sim at its limits never busy-spins and always
# stops on SIGTERM: out of descriptors (EMFILE) it parks the listener rather
# than spinning on accept, and accepts again once descriptors free up;
# thousands of pipelined requests on one connection are answered one after
# another (no recursion, no stack overflow); SIGTERM while out of
# descriptors with streams in flight, and while busy at --speedup 0 and at
# a finite speedup, stops it within seconds, exit 0, no leak.
source "$(dirname "$0")/sim_env.inc"

# cpu_ticks PID — user + system time so far, in clock ticks
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
# hold_conns N SECONDS — N idle client connections to the sim, in the background
hold_conns() {
	bash -c 'for i in $(seq '"$1"'); do exec {fd}<>/dev/tcp/127.0.0.1/'"$PORT"' || exit 1; done; sleep '"$2" \
		2>/dev/null &
	HOLD_PID=$!
	on_exit "kill $HOLD_PID"
}
# stop_within NAME SECONDS — SIGTERM; exits in time, 0, no sanitizer report
stop_within() {
	local t0=$(date +%s%N) rc=0 ms
	kill -TERM "$SIM_PID"
	for _ in $(seq $(($2 * 10))); do kill -0 "$SIM_PID" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "$SIM_PID" 2>/dev/null; then
		tap_fail "$1: SIGTERM stops the sim within $2 s" "still running, $(ps -o pcpu= -p "$SIM_PID")% CPU"
		kill -KILL "$SIM_PID"
		wait "$SIM_PID" 2>/dev/null
		return
	fi
	wait "$SIM_PID" || rc=$?
	ms=$(( ($(date +%s%N) - t0) / 1000000 ))
	if [ "$rc" -eq 0 ] && ! grep -qE 'AddressSanitizer|LeakSanitizer|runtime error' "$SIM_LOG"; then
		tap_ok "$1: SIGTERM stops the sim in $ms ms, exit 0, no leak"
	else
		tap_fail "$1: SIGTERM stops the sim cleanly" \
			"exit $rc after $ms ms $(grep -E -A5 'Sanitizer|runtime error' "$SIM_LOG" | head -20)"
	fi
}

# --- out of descriptors: parked, not spinning ---
start_sim fds --speedup 0
prlimit --pid "$SIM_PID" --nofile=40:40
hold_conns 80 6
sleep 1
t0=$(cpu_ticks "$SIM_PID")
sleep 2
used=$(( $(cpu_ticks "$SIM_PID") - t0 ))
nfd=$(ls "/proc/$SIM_PID/fd" | wc -l)
check "EMFILE ($nfd descriptors open, limit 40): the sim idles ($used ticks of CPU in 2 s, at most $((hz / 5)))" \
	test "$used" -le $((hz / 5))
kill "$HOLD_PID"
wait "$HOLD_PID" 2>/dev/null
expect_eq "descriptors free again: the sim accepts and answers" \
	"$(curl -s -m 5 -o /dev/null -w '%{http_code}' "$URL/health")" 200

# out of descriptors again, this time with streams in flight, then SIGTERM
"$load" --target "127.0.0.1:$PORT" --closed --connections 60 --duration 30 --timeout 30 \
	--tenant "s::0:400:2000:stream" >/dev/null 2>&1 &
load_pid=$!
on_exit "kill $load_pid"
t0=$(cpu_ticks "$SIM_PID")
sleep 2
used=$(( $(cpu_ticks "$SIM_PID") - t0 ))
nfd=$(ls "/proc/$SIM_PID/fd" | wc -l)
check "  streams in flight at the limit ($nfd descriptors, $used ticks of CPU in 2 s)" \
	test "$nfd" -ge 38 -a "$used" -gt 0
stop_within "out of descriptors, streams in flight" 5
kill "$load_pid" 2>/dev/null
wait "$load_pid" 2>/dev/null

# --- pipelining: 20,000 requests in one write, answered in order ---
start_sim pipeline --speedup 0
n=20000
{ for _ in $(seq $n); do printf 'GET /health HTTP/1.1\r\nHost: x\r\n\r\n'; done
  printf 'GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'; } >"$tmp/pipelined"
got=$(bash -c 'exec 3<>/dev/tcp/127.0.0.1/'"$PORT"'; cat "$1" >&3; timeout 60 cat <&3' _ "$tmp/pipelined" |
	grep -c '^HTTP/1.1 200 OK')
expect_eq "$((n + 1)) pipelined requests on one connection: all answered" "$got" $((n + 1))
check "  the sim is still up" curl -sf -m 5 -o /dev/null "$URL/health"
stop_within "after pipelining" 5

# --- SIGTERM while busy: as fast as possible, and paced ---
for speedup in 0 50; do
	start_sim "busy$speedup" --speedup "$speedup"
	"$load" --target "127.0.0.1:$PORT" --closed --connections 300 --duration 30 --timeout 30 \
		--tenant "b::0:1000:4000:stream" --tenant "c::0:4000:3000" >/dev/null 2>&1 &
	load_pid=$!
	on_exit "kill $load_pid"
	sleep 2
	check "--speedup $speedup: busy ($(metric vllm:num_requests_running) running, $(metric vllm:num_requests_waiting) waiting)" \
		test "$(metric vllm:num_requests_running)" -gt 0
	stop_within "--speedup $speedup, 600 connections busy" 5
	kill "$load_pid" 2>/dev/null
	wait "$load_pid" 2>/dev/null
done
