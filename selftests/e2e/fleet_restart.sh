#!/usr/bin/env bash
# fleet_restart.sh — a restarted fairgated does not hand out a fresh burst.
# Alone (no agent.fleet), the bucket comes back from the pinned tenants map
# (its level and when it was published), refilled at the contract for the
# time the agent was down; under agent.fleet the fleet bucket in Redis has
# the state, so neither the restarted node nor any other gets the burst
# again. Each time: a tenant spends its burst, fairgated is SIGKILLed and
# started again, and the same requests are sent again.
source "$(dirname "$0")/fleet_env.inc"
bpffs_ready

fl_netns restart 44
PIN=/sys/fs/bpf/fgt-fl-restart-$$
on_exit "rm -rf $PIN"
# alpha: 300 units/s, 20 s of burst = 6000 units, ~45 requests of ~130 units
FL_RATE_A=300 FL_BURST_A=20

# --- alone: the pinned map ---------------------------------------------------
FL_ALONE=1 fl_policy 1
fl_start 1 --pin-dir "$PIN"
if [ "$(fctl 1 status --json | jq -r .kernel_enforcement)" != true ]; then
	tap_skip "restart from the pinned map" "kernel enforcement unavailable: $(grep -m1 'kernel enforcement off' "$FL_TMP/agent1.log")"
else
	first=$(fl_burst 1 alpha "$FL_KEY_A" 80 "$FL_TMP/alone1.json")
	t_end=$(date +%s.%N)
	check "alone: the burst admits about 6000 units' worth ($first of 80)" fl_between 40 "$first" 55
	fl_kill9 1
	fl_start 1 --pin-dir "$PIN"
	check "alone: restarted, the bucket comes back from the pinned map" \
		grep -q "restored from the pinned tenants map (refilled for the time the agent was down)" "$FL_TMP/agent1.log"
	second=$(fl_burst 1 alpha "$FL_KEY_A" 80 "$FL_TMP/alone2.json")
	gap=$(awk -v a="$t_end" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
	# what 300 units/s refill over the gap pays for, and a request to spare
	may=$(awk -v g="$gap" 'BEGIN { printf "%d", 300 * g / 120 + 2 }')
	check "alone: after SIGKILL + restart, $second of 80 (the refill over ${gap} s: at most $may), not a fresh burst" \
		test "$second" -le "$may"
	fl_stop_clean 1
fi
rm -rf "$PIN"

# --- the fleet: Redis -----------------------------------------------------------
# open loop at ~40 requests/s (a closed-loop blast would be refused before
# the node's first call for units comes back)
unset FL_ALONE
fl_redis_start
for i in 1 2 3; do fl_policy "$i"; fl_start "$i"; done
fl_load 1 alpha "$FL_KEY_A" 40 4 "$FL_TMP/fleet1.json"
fl_wait_loads
t_end=$(date +%s.%N)
read -r sent first _ <<<"$(fl_status "$FL_TMP/fleet1.json")"
check "fleet: 4 s at ~5200 units/s through node 1 spend the 6000-unit burst ($first of $sent served)" \
	fl_between 45 "$first" 60
fl_kill9 1
fl_start 1
check "fleet: node 1 is back with a new incarnation" test "$(grep -c 'fairgated: fleet: node n1' "$FL_TMP/agent1.log")" -ge 1
fl_load 1 alpha "$FL_KEY_A" 40 4 "$FL_TMP/fleet2.json"
fl_load 2 alpha "$FL_KEY_A" 40 4 "$FL_TMP/fleet3.json"
fl_wait_loads
read -r _ again _ <<<"$(fl_status "$FL_TMP/fleet2.json")"
read -r _ other _ <<<"$(fl_status "$FL_TMP/fleet3.json")"
gap=$(awk -v a="$t_end" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
may=$(awk -v g="$gap" 'BEGIN { printf "%d", 300 * g / 120 + 3 }')
check "fleet: after SIGKILL + restart node 1 admits $again, node 2 $other (the refill over ${gap} s: at most $may together), no fresh burst" \
	test $((again + other)) -le "$may"
fctl 2 fleet --json >"$FL_TMP/f2.json"
expect_eq "fleet: node 2 sees one n1 (the new incarnation replaced the killed one)" \
	"$(jq -r '[.tenants[] | select(.name == "alpha") | .nodes[] | select(.node == "n1")] | length' "$FL_TMP/f2.json")" 1
fl_load 3 beta "$FL_KEY_B" 5 3 "$FL_TMP/beta.json"
fl_wait_loads
read -r sent ok _ <<<"$(fl_status "$FL_TMP/beta.json")"
check "fleet: beta untouched ($ok of $sent through node 3)" test "$ok" -eq "$sent" -a "$sent" -ge 14
for i in 1 2 3; do fl_stop_clean "$i"; done
