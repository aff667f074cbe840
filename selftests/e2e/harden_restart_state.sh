#!/usr/bin/env bash
# harden_restart_state.sh — issue #15 case 4: a restart after SIGKILL keeps
# every state, and what the restarted agent reports is what gate enforces.
# beta spends its bucket and opens a quota deny window; fairgated is
# SIGKILLed and started again on the same pins. Then: the bucket is not
# full again (at most the refill over the gap), the window is still open in
# `fairgatectl status` exactly when gate still drops beta's SYNs (with its
# remaining time and its source, the quota controller), and beta's counters
# (admitted, units billed) are not back at zero. Then a request in flight at
# a second kill is written off, billed as its reservation.
source "$(dirname "$0")/harden_env.inc"
need_root "restart state"
bpffs_ready

px_netns hdrst 156
PIN=/sys/fs/bpf/fgt-hd-rst-$$
on_exit "rm -rf $PIN"
hd_gate_policy
px_start_sim --speedup 0
hd_gate_agent --cleanup
expect_eq "before: beta connects" "$(hd_probe "$PX_CLI")" connected
expect_eq "beta's request admitted (spends the bucket)" "$(hd_open_window)" 200
pctl status --json >"$PX_TMP/before.json"
t0=$(date +%s.%N)
b() { jq -r --arg t beta ".tenants[] | select(.name == \$t) | .$2" "$1"; }
bucket0=$(b "$PX_TMP/before.json" bucket_units) rem0=$(b "$PX_TMP/before.json" deny_remaining_ms)
admitted0=$(b "$PX_TMP/before.json" admitted) billed0=$(b "$PX_TMP/before.json" units_billed)
expect_eq "window open for beta before the kill" "$(b "$PX_TMP/before.json" deny_window_open)" true
echo "# before: bucket $bucket0, window ${rem0} ms left, admitted $admitted0, billed $billed0"
kill -KILL "$PX_AGENT_PID"; wait "$PX_AGENT_PID" 2>/dev/null
hd_gate_agent
pctl status --json >"$PX_TMP/after.json"
gap=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
gate=$(hd_probe "$PX_CLI" 600)
open=$(b "$PX_TMP/after.json" deny_window_open) rem=$(b "$PX_TMP/after.json" deny_remaining_ms)
bucket=$(b "$PX_TMP/after.json" bucket_units)
echo "# ${gap} s between the two reads: status says window=$open (${rem} ms), bucket $bucket; gate: beta's SYN $gate; pinned deny_source $(hd_pinned_beta deny_source)"
# the slack (10 units, 5% of the burst) covers the last publish before the kill
check "the bucket is not handed back full: $bucket <= $bucket0 + 20 units/s x ${gap} s + 10 (the burst is 200)" \
	awk -v n="$bucket" -v b="$bucket0" -v g="$gap" 'BEGIN { exit !(n <= b + 20 * g + 10) }'
expect_eq "status reports what gate enforces (status: window open=$open; gate: beta's SYN $gate)" \
	"$open" "$([ "$gate" = timeout ] && echo true || echo false)"
expect_eq "the window survives the restart in status (the quota controller opened it ${rem0} ms before its end)" "$open" true
check "its remaining time continues from the kill (${rem} ms, expected about $rem0 - ${gap} s)" \
	awk -v r="${rem:-0}" -v r0="$rem0" -v g="$gap" 'BEGIN { w = r0 - g * 1000; exit !(r > w - 1500 && r < w + 1500) }'
expect_eq "gate's map still names the quota controller as the window's source" "$(hd_pinned_beta deny_source)" 2
expect_eq "status names the same source" "$(b "$PX_TMP/after.json" deny_source)" quota
expect_eq "beta's admitted count is kept" "$(b "$PX_TMP/after.json" admitted)" "$admitted0"
check "beta's billed units are kept ($(b "$PX_TMP/after.json" units_billed), were $billed0)" \
	awk -v a="$(b "$PX_TMP/after.json" units_billed)" -v b="$billed0" 'BEGIN { exit !(a >= b - 0.5 && b > 0) }'
check "no reservation left behind" no_leaked_reservations

# A request in flight at the kill is written off, billed as reserved (its
# reservation left the bucket at admission; a refund would hand back work
# the engine may have done). The simulator at real speed keeps alpha's
# 3,000-token stream running for seconds. (The pinned map keeps reserved
# units whole: within one unit.)
px_stop_sim
px_start_sim --speedup 1
pctl status --json >"$PX_TMP/w0.json"
a() { jq -r --arg t alpha ".tenants[] | select(.name == \$t) | .$2" "$1"; }
pc "$PX_URL/v1/chat/completions" -H "Authorization: Bearer $PX_KEY_A" --max-time 30 \
	-d '{"messages":[{"role":"user","content":"a long story"}],"max_tokens":3000,"stream":true}' \
	-o "$PX_TMP/long_stream" &
stream_pid=$!
for _ in $(seq 50); do
	pctl status --json >"$PX_TMP/w1.json"
	[ "$(a "$PX_TMP/w1.json" inflight)" = 1 ] && break
	sleep 0.1
done
reserved=$(a "$PX_TMP/w1.json" reserved_units)
expect_eq "alpha's stream is in flight at the kill (reserved $reserved units)" "$(a "$PX_TMP/w1.json" inflight)" 1
kill -KILL "$PX_AGENT_PID"; wait "$PX_AGENT_PID" 2>/dev/null
wait "$stream_pid" 2>/dev/null
hd_gate_agent
pctl status --json >"$PX_TMP/w2.json"
expect_eq "restarted: the in-flight request is written off" \
	"$(a "$PX_TMP/w2.json" written_off)" $(( $(a "$PX_TMP/w0.json" written_off) + 1 ))
check "  as its reservation ($(a "$PX_TMP/w2.json" units_written_off) units written off, $reserved reserved)" \
	awk -v w="$(a "$PX_TMP/w2.json" units_written_off)" -v w0="$(a "$PX_TMP/w0.json" units_written_off)" -v r="$reserved" \
	'BEGIN { exit !(r > 0 && w - w0 >= r - 1 && w - w0 <= r + 1) }'
check "  and billed: $(a "$PX_TMP/w0.json" units_billed) -> $(a "$PX_TMP/w2.json" units_billed) (+ the reservation)" \
	awk -v b="$(a "$PX_TMP/w2.json" units_billed)" -v b0="$(a "$PX_TMP/w0.json" units_billed)" -v r="$reserved" \
	'BEGIN { exit !(b - b0 >= r - 1 && b - b0 <= r + 1) }'
check "  the log says how many" grep -q "written off" "$PX_TMP/agent.log"
expect_eq "  nothing in flight after the restart" "$(a "$PX_TMP/w2.json" inflight)" 0
check "no reservation left behind" no_leaked_reservations
px_stop_agent_clean
