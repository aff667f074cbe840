#!/usr/bin/env bash
# fleet_share.sh — one tenant's contract held fleet-wide across three
# fairgated + fairgate-sim nodes and a real Redis (agent.fleet): its load
# spread 33/33/33 and then shifted to 80/10/10, offered at ~1.5x the
# contract, is admitted within 5% of the contract in both phases (>= 95%
# too: demand exceeds it) and in proportion to each node's demand after the
# shift; the whole run stays inside the stated bound (one bucket of the
# contract plus the per-node terms, fg_fleet_bound_units); a second tenant
# is unaffected; the fleet figures (fairgatectl fleet, peaks, the
# oversubscription ratio) come from the same calls.
#
# Window: 15 s of steady state and 25 s after the shift instead of 60 s of
# virtual time: with period_s 1 that is 15 and 25 grant periods, and the
# shares settle within two (the shift is measured from its first second).
source "$(dirname "$0")/fleet_env.inc"

fl_netns share 41
R=3000 D=3000 # alpha: 3000 units/s, 1 s of burst
fl_redis_start
for i in 1 2 3; do fl_policy "$i"; fl_start "$i"; done
for i in 1 2 3; do
	check "node $i reaches the store" grep -q "the store answers" "$FL_TMP/agent$i.log"
done

# one request's price (the simulator bills what it counts; the first
# answers tell)
price=$(ip netns exec "$FL_HUB" curl -sS --max-time 5 "http://$FL_NET.1:8000/v1/chat/completions" \
	-H "Authorization: Bearer $FL_KEY_B" -d '{"messages":[{"role":"user","content":"x"}],"max_tokens":16}' -o /dev/null -w '%{http_code}')
expect_eq "a request through node 1" "$price" 200

t0=$(date +%s.%N)
b0=$(fl_billed_all alpha)
for i in 1 2 3; do
	fl_load "$i" alpha "$FL_KEY_A" 11.5 15 "$FL_TMP/a$i.json"
	fl_load "$i" beta "$FL_KEY_B" 2 41 "$FL_TMP/b$i.json"
done
sleep 5
t1=$(date +%s.%N) b1=$(fl_billed_all alpha)
sleep 10
t2=$(date +%s.%N) b2=$(fl_billed_all alpha)
# the shift: 80/10/10 of the same total
fl_load 1 alpha "$FL_KEY_A" 27.6 25 "$FL_TMP/c1.json"
fl_load 2 alpha "$FL_KEY_A" 3.45 25 "$FL_TMP/c2.json"
fl_load 3 alpha "$FL_KEY_A" 3.45 25 "$FL_TMP/c3.json"
sleep 23
lease1=$(fl_metric 1 'fairgate_fleet_tenant_rate_units_per_second{tenant="alpha"}')
sleep 2
t3=$(date +%s.%N) b3=$(fl_billed_all alpha)
fl_wait_loads

rate() { awk -v a="$(fl_sum "$1")" -v b="$(fl_sum "$2")" -v t0="$3" -v t1="$4" 'BEGIN { printf "%.1f", (b - a) / (t1 - t0) }'; }
ra=$(rate "$b1" "$b2" "$t1" "$t2")
rb=$(rate "$b2" "$b3" "$t2" "$t3")
lo=$(awk -v r=$R 'BEGIN { print 0.95 * r }') hi=$(awk -v r=$R 'BEGIN { print 1.05 * r }')
check "33/33/33: the fleet admits $ra units/s of the 3000 contract (within 5%, demand ~1.5x)" fl_between "$lo" "$ra" "$hi"
check "80/10/10, from the shift on: $rb units/s (within 5%)" fl_between "$lo" "$rb" "$hi"
split=$(fl_diff "$b2" "$b3")
share1=$(echo "$split" | awk '{ printf "%.3f", $1 / ($1 + $2 + $3) }')
check "after the shift node 1 gets its demand's share: $share1 of the units (demand 0.8; per node $split)" \
	fl_between 0.72 "$share1" 0.88
for i in 1 2 3; do
	read -r sent ok r429 _ <<<"$(fl_status "$FL_TMP/a$i.json")"
	check "node $i: alpha over its share was told 429 ($r429 of $sent), never an error" \
		test "$r429" -gt 0 -a $((ok + r429)) -eq "$sent"
done

# the bound over the whole run: one bucket (D + R x t) plus, per node, the
# sliver and a settlement excess of at most two requests' price
total=$(fl_sum "$(fl_diff "$b0" "$b3")")
req_units=$(awk -v u="$(fl_sum "$(fl_diff "$b0" "$b3")")" -v n="$(jq -s 'map(.tenants[0].status["200"] // 0) | add' "$FL_TMP"/a?.json "$FL_TMP"/c?.json)" 'BEGIN { printf "%.1f", u / n }')
bound=$(awk -v d=$D -v r=$R -v t="$(awk -v a="$t0" -v b="$t3" 'BEGIN { print b - a }')" -v p="$req_units" \
	'BEGIN { printf "%.0f", d + r * t + 3 * (2 * p + 0.001 * r * t) }')
check "the whole run ($total units) stays within the bound ($bound: D + R x t + 3 x (2 requests + sliver))" \
	float_le "$total" "$bound"

# the second tenant never noticed
for i in 1 2 3; do
	read -r sent ok r429 p50 p99 <<<"$(fl_status "$FL_TMP/b$i.json")"
	check "node $i: beta all served ($ok of $sent, p99 ${p99} ms; $(fl_outcomes "$FL_TMP/b$i.json"))" \
		test "$ok" -eq "$sent" -a "$sent" -gt 70
done

# what the fleet says, from the same calls
fctl 1 fleet --json >"$FL_TMP/fleet.json"
expect_eq "fairgatectl fleet: alpha in a lease" "$(jq -r '.tenants[] | select(.name == "alpha") | .mode' "$FL_TMP/fleet.json")" lease
expect_eq "fairgatectl fleet: three nodes hold alpha" "$(jq -r '.tenants[] | select(.name == "alpha") | .live_nodes' "$FL_TMP/fleet.json")" 3
others=$(jq -r '[.tenants[] | select(.name == "alpha") | .nodes[].node] | sort | join(",")' "$FL_TMP/fleet.json")
expect_eq "fairgatectl fleet: node 1 sees n2 and n3" "$others" "n2,n3"
check "fairgatectl fleet: the store answers, three live nodes" \
	jq -e '.reachable and .fleet.live_nodes == 3' "$FL_TMP/fleet.json"
check "fleet peaks measured fleet-wide: windows closed, oversubscription >= 1" \
	jq -e '.fleet.windows_closed >= 2 and .fleet.oversubscription >= 1 and .fleet.peak_units_per_s > 3000' "$FL_TMP/fleet.json"
fctl 1 fleet >"$FL_TMP/fleet.txt"
check "fairgatectl fleet (human) names the other nodes" grep -qE '^alpha .*n[23] lease' "$FL_TMP/fleet.txt"
check "metric: fairgate_fleet_store_up 1" test "$(fl_metric 1 fairgate_fleet_store_up)" = 1
check "metric: alpha's lease on node 1 under 80% of the demand: $lease1 units/s" \
	fl_between 1800 "${lease1:-0}" 3000
check "metric: fleet oversubscription ratio" \
	awk -v v="$(fl_metric 1 fairgate_fleet_oversubscription_ratio)" 'BEGIN { exit !(v >= 1) }'

for i in 1 2 3; do fl_stop_clean "$i"; done
# a node that stops hands its leases back
recs=$(fl_redis_cli HLEN 'fg:{alpha}:n')
expect_eq "stopped nodes left no record in the store" "$recs" 0
