#!/usr/bin/env bash
# harden_gate_crash.sh — issue #15 case 8: gate's crash semantics. gate is
# kept attached when fairgated dies (a gateway that failed open on a crash
# would let a denied tenant flood the engine exactly while nothing meters
# it): after a SIGKILL it goes on judging SYNs with the windows in the
# pinned map, each window ends at its own end time (gate compares against
# it, so nothing is held for ever), a restarted agent takes the dead one's
# gate over and reports the window it finds, and a clean stop (SIGTERM)
# detaches gate and keeps the maps.
source "$(dirname "$0")/harden_env.inc"
need_root "gate after a crash"
bpffs_ready

px_netns hdcrash 157
PIN=/sys/fs/bpf/fgt-hd-crash-$$
on_exit "rm -rf $PIN"
on_exit "ip -n fgt-px-hdcrash-s link set dev px-s xdp off"
hd_gate_policy
px_start_sim --speedup 0
hd_gate_agent --cleanup
expect_eq "beta's request admitted (spends the bucket)" "$(hd_open_window)" 200
rem0=$(tenant_field beta deny_remaining_ms)
expect_eq "window open for beta" "$(tenant_field beta deny_window_open)" true
expect_eq "inside the window, with fairgated up, gate drops beta's SYN" "$(hd_probe "$PX_CLI" 600)" timeout
t_kill=$SECONDS
kill -KILL "$PX_AGENT_PID"; wait "$PX_AGENT_PID" 2>/dev/null
PX_AGENT_PID=
if hd_xdp_attached; then attached=yes; else attached=no; fi
beta=$(hd_probe "$PX_CLI" 600) alpha=$(hd_probe "$PX_CLI2" 600)
echo "# after SIGKILL: bpftool net: $(nsenter --net=/run/netns/"$PX_SNS" bpftool net show dev px-s 2>/dev/null | tr -s ' \n' ' ')"
expect_eq "down: gate stays attached after a SIGKILL" "$attached" yes
expect_eq "down: gate's program stays pinned beside the maps (the next agent's handle on it)" \
	"$([ -e "$PIN/gate_prog" ] && echo yes || echo no)" yes
expect_eq "down: alpha (no window) passes gate and reaches the stack (refused: nobody listens)" "$alpha" refused
expect_eq "down: beta's window is still enforced: gate drops its SYN" "$beta" timeout

# a restarted agent reports the window gate enforces, with its source
hd_gate_agent
rem1=$(tenant_field beta deny_remaining_ms)
expect_eq "restarted: status reports beta's window open (${rem1} ms left of ${rem0})" \
	"$(tenant_field beta deny_window_open)" true
expect_eq "restarted: its source is the quota controller" "$(tenant_field beta deny_source)" quota
expect_eq "restarted: gate still drops beta's SYN" "$(hd_probe "$PX_CLI" 600)" timeout
kill -KILL "$PX_AGENT_PID"; wait "$PX_AGENT_PID" 2>/dev/null
PX_AGENT_PID=

# down again, until the window's end, then after it
sleep $(( (rem0 + 999) / 1000 - (SECONDS - t_kill) + 1 ))
beta=$(hd_probe "$PX_CLI" 600)
echo "# $((SECONDS - t_kill)) s after the first kill (the window had ${rem0} ms): beta's SYN: $beta"
expect_eq "down, past the window's end: beta's SYN passes gate (refused: nobody listens)" "$beta" refused
expect_eq "down, past the window's end: gate is still attached (judging, not holding)" \
	"$(hd_xdp_attached && echo yes || echo no)" yes

# a clean stop detaches gate and keeps the maps
hd_gate_agent
expect_eq "restarted: it took the dead agent's gate over" "$(hd_xdp_attached && echo yes || echo no)" yes
px_stop_agent_clean
expect_eq "after SIGTERM: gate is detached" "$(hd_xdp_attached && echo yes || echo no)" no
expect_eq "after SIGTERM: no gate_prog pin" "$([ -e "$PIN/gate_prog" ] && echo yes || echo no)" no
expect_eq "after SIGTERM: the maps stay pinned" "$([ -e "$PIN/tenants" ] && echo yes || echo no)" yes
