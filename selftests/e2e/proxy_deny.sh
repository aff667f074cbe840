#!/usr/bin/env bash
# proxy_deny.sh — the controller hands an over-quota flood to the kernel:
# beta's authenticated request teaches the kernel its source address and
# empties its bucket; fairgated opens a deny window (quota) for as long as
# the bucket needs to cover beta's typical request; the XDP gate then drops
# beta's SYNs (a real connect and a raw SYN flood) without the agent seeing
# a connection, while alpha's requests keep succeeding; the window closes as
# the bucket refills and beta is served again.
source "$(dirname "$0")/proxy_env.inc"
need_root "proxy deny window"
bpffs_ready

px_netns deny 16
PIN=/sys/fs/bpf/fgt-px-deny-$$
on_exit "rm -rf $PIN"
# beta: 40 units/s, 5 s burst = 200 units; one request of 100 prompt and 57
# output tokens empties it: 100 + 56 decode steps at ~128 tokens of context
# (1.66 units each) = 193 units
PX_RATE_B=40 PX_BURST_S=5 px_policy "  protected_ports: [8000]
  interfaces: [px-s]
  xdp_mode: native
  deny_allowance_per_s: 0"
px_start_sim --speedup 0
spawn "$PX_TMP/agent.log" nsenter --net=/run/netns/"$PX_SNS" "$FG_BUILD/fairgated" \
	--policy "$PX_TMP/policy.yaml" --ctl "$PX_TMP/ctl.sock" --pin-dir "$PIN" --cleanup
PX_AGENT_PID=$SPAWNED_PID
wait_port "$PX_SNS" 127.0.0.1 8000 10 || { tap_fail "fairgated starts" "$(tail -5 "$PX_TMP/agent.log")"; exit 1; }
if [ "$(pctl status --json | jq -r .kernel_enforcement)" != true ]; then
	tap_skip "deny window through the gate" "kernel enforcement unavailable: $(grep -m1 'kernel enforcement off' "$PX_TMP/agent.log")"
	exit 0
fi
export FAIRGATE_PIN_DIR=$PIN FAIRGATE_CTL=$PX_TMP/ctl.sock
probe() { ip netns exec "$PX_CNS" "$FG_BUILD/fg-tcpprobe" connect "$PX_SRV" 8000 --src "$1" --timeout-ms "${2:-800}" | tail -1; }
syn_delayed() { "$FG_BUILD/fairgatectl" tenant show beta --json | jq -r '.. | .syn_delayed? // empty' | head -1; }
accepted() { metric fairgate_client_connections_total; }

r=$(probe "$PX_CLI")
check "before: beta connects ($r)" bash -c "[[ '$r' == connected* ]]"

ids=$(seq -s, 1 100)
code=$(pc "$PX_URL/v1/completions" -H "Authorization: Bearer $PX_KEY_B" \
	-d "{\"prompt\":[$ids],\"max_tokens\":57}" -o /dev/null -w '%{http_code}')
expect_eq "beta's request admitted (and spends the bucket)" "$code" 200
learned=$(bpftool map dump pinned "$PIN/src_learned" -j 2>/dev/null | jq -r '.[].formatted.value.tenant_id // .[].value.tenant_id' | head -1)
expect_eq "the kernel learned beta's source address (tenant id 1)" "$learned" 1
expect_eq "deny window open for beta" "$(tenant_field beta deny_window_open)" true
rem=$(tenant_field beta deny_remaining_ms)
check "window lasts the refill time for a typical request (~4.8 s, got ${rem} ms)" \
	awk -v r="$rem" 'BEGIN { exit !(r > 3500 && r < 5200) }'
# a lookup of beta's id, not a dump: the map has 65,536 slots, and a dump
# formatted by BTF took longer than the window lasts (the window had
# closed by the time the SYN below was sent)
src=$(bpftool map lookup pinned "$PIN/tenants" key 1 0 0 0 -j | jq -r '(.formatted.value // .value) | select(.name == "beta") | .deny_source')
expect_eq "bpftool: beta's window was opened by the quota controller" "$src" 2
expect_eq "alpha not denied" "$(tenant_field alpha deny_window_open)" false

conns=$(accepted)
r=$(probe "$PX_CLI" 600)
check "inside the window beta's SYN goes unanswered ($r)" bash -c "[[ '$r' == timeout* ]]"
ix=$(pctl status --json | jq -c .source_index)
expect_eq "status: gate's source index is valid ($ix)" "$(jq -r .valid <<<"$ix")" true
expect_eq "metrics: fairgate_source_index_valid" "$(metric fairgate_source_index_valid)" 1
without_index() { bpftool map dump pinned "$PIN/node_stats" -j | jq '[.. | .attr_without_index? // empty] | add'; }
before_ix=$(without_index)
before=$(syn_delayed)
ifc=$(ip netns exec "$PX_CNS" cat /sys/class/net/px-c/ifindex)
sent=$(nsenter --net=/run/netns/"$PX_CNS" "$FG_BUILD/fg-gate-bench" --flood "$ifc" --src "$PX_CLI" --seconds 1 |
	awk '/^flood:/ { print $2 }')
after=$(syn_delayed)
dropped=$((after - before))
check "SYN flood from beta: gate dropped $dropped of ${sent:-0} SYNs (>= 95%)" \
	awk -v d="$dropped" -v s="${sent:-0}" 'BEGIN { exit !(s > 1000 && d >= 0.95 * s) }'
expect_eq "the flood cost the agent no connection" "$(accepted)" "$conns"
missed=$(( $(without_index) - before_ix ))
check "the source index answered the flood ($missed of $sent SYNs asked the maps)" \
	awk -v m="$missed" -v s="${sent:-0}" 'BEGIN { exit !(m <= s / 100) }'
r=$(pc2 "$PX_URL/v1/chat/completions" -H "Authorization: Bearer $PX_KEY_A" \
	-d '{"messages":[{"role":"user","content":"still there?"}],"max_tokens":4}' -o /dev/null -w '%{http_code}')
expect_eq "alpha's requests keep succeeding during beta's window" "$r" 200

for _ in $(seq 1 70); do [ "$(tenant_field beta deny_window_open)" = false ] && break; sleep 0.1; done
expect_eq "window closes as the bucket refills" "$(tenant_field beta deny_window_open)" false
r=$(probe "$PX_CLI" 1500)
check "after the window beta connects again ($r)" bash -c "[[ '$r' == connected* ]]"
code=$(pc "$PX_URL/v1/completions" -H "Authorization: Bearer $PX_KEY_B" \
	-d "{\"prompt\":[$ids],\"max_tokens\":57}" -o /dev/null -w '%{http_code}')
expect_eq "and is served" "$code" 200
check "no reservation left behind" no_leaked_reservations
px_stop_agent_clean
