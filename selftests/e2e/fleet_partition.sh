#!/usr/bin/env bash
# fleet_partition.sh — one node loses Redis (its packets to the store are
# dropped, the connection hangs; nothing is refused) while the other two
# reach it: after 2T the cut-off node runs at contract / 3 live nodes, the
# store reserves exactly that for it, and the other two share the rest, so
# the fleet stays at its contract; healed, the node is charged what it used
# (which was reserved: no debt) and is back in a lease. The second tenant
# is served throughout, the cut-off node included.
source "$(dirname "$0")/fleet_env.inc"

fl_netns part 43
R=3000
FL_BURST_A=0.3 # a burst of 900 units: spent within the first seconds
fl_redis_start
for i in 1 2 3; do fl_policy "$i"; fl_start "$i"; done
rate() { awk -v a="$1" -v b="$2" -v t0="$3" -v t1="$4" 'BEGIN { printf "%.1f", (b - a) / (t1 - t0) }'; }
field() { echo "$1" | awk -v f="$2" '{ print $f }'; }

# alpha at ~1.2x the contract on every node: each wants more than a third
for i in 1 2 3; do
	fl_load "$i" alpha "$FL_KEY_A" 9 40 "$FL_TMP/a$i.json"
	fl_load "$i" beta "$FL_KEY_B" 2 40 "$FL_TMP/b$i.json"
done
sleep 6
t1=$(date +%s.%N) b1=$(fl_billed_all alpha)
sleep 6
t2=$(date +%s.%N) b2=$(fl_billed_all alpha)
ip netns exec "$(fl_ns 3)" iptables -A OUTPUT -d "$FL_REDIS" -p tcp --dport 6379 -j DROP
sleep 4 # 2T and a call timeout
t3=$(date +%s.%N) b3=$(fl_billed_all alpha)
sleep 10
t4=$(date +%s.%N) b4=$(fl_billed_all alpha)
fctl 3 fleet --json >"$FL_TMP/cut3.json"
fctl 1 fleet --json >"$FL_TMP/cut1.json"
ip netns exec "$(fl_ns 3)" iptables -D OUTPUT -d "$FL_REDIS" -p tcp --dport 6379 -j DROP
sleep 4
t5=$(date +%s.%N) b5=$(fl_billed_all alpha)
sleep 8
t6=$(date +%s.%N) b6=$(fl_billed_all alpha)
fctl 3 fleet --json >"$FL_TMP/healed3.json"
fl_wait_loads

before=$(rate "$(fl_sum "$b1")" "$(fl_sum "$b2")" "$t1" "$t2")
check "all three reach the store: $before units/s (contract 3000, within 5%)" fl_between 2850 "$before" 3150
d=$(fl_diff "$b3" "$b4")
cut=$(rate 0 "$(field "$d" 3)" "$t3" "$t4")
rest=$(rate 0 "$(awk '{ print $1 + $2 }' <<<"$d")" "$t3" "$t4")
total=$(rate 0 "$(fl_sum "$d")" "$t3" "$t4")
check "cut off: node 3 runs at $cut units/s, at most contract / 3 (+5%)" float_le "$cut" 1050
check "cut off: node 3 still serves (fail-static: $cut units/s)" float_le 900 "$cut"
check "the other two share the rest: $rest units/s of 2000 (within 5%)" fl_between 1900 "$rest" 2100
check "the fleet stays at its contract: $total units/s" fl_between 2850 "$total" 3150
expect_eq "node 3: fallback" "$(jq -r '.tenants[] | select(.name == "alpha") | .mode' "$FL_TMP/cut3.json")" fallback
check "node 3: the store does not answer it" jq -e '.reachable == false' "$FL_TMP/cut3.json"
expect_eq "node 1 sees node 3 in fallback" \
	"$(jq -r '.tenants[] | select(.name == "alpha") | .nodes[] | select(.node == "n3") | .state' "$FL_TMP/cut1.json")" fallback
check "node 1 counts 1000 units/s reserved for node 3" \
	jq -e '.tenants[] | select(.name == "alpha") | .nodes[] | select(.node == "n3") | (.rate_units_per_s - 1000 | fabs) < 1' "$FL_TMP/cut1.json"
after=$(rate "$(fl_sum "$b5")" "$(fl_sum "$b6")" "$t5" "$t6")
check "healed: $after units/s (contract 3000, within 5%)" fl_between 2850 "$after" 3150
check "healed: node 3 answers and holds a lease again" \
	jq -e '.reachable and (.tenants[] | select(.name == "alpha") | .mode == "lease" and .epoch_changes == 0)' "$FL_TMP/healed3.json"
for i in 1 2 3; do
	read -r sent ok _ <<<"$(fl_status "$FL_TMP/b$i.json")"
	check "node $i: beta all served ($ok of $sent; $(fl_outcomes "$FL_TMP/b$i.json"))" test "$ok" -eq "$sent" -a "$sent" -gt 70
done
for i in 1 2 3; do fl_stop_clean "$i"; done
