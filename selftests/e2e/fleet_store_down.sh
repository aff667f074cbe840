#!/usr/bin/env bash
# fleet_store_down.sh — Redis goes away under load and comes back, twice:
# the grant thread is off the request path, so the second tenant's latency
# and the admission decision's cost do not change while the store is down;
# the nodes keep their leases for 2T, then fall back to contract / live
# nodes (fail-static, never the whole contract per node), so the fleet
# total stays within the stated outage bound. A store that comes back with
# its state (AOF) charges what the nodes used meanwhile: no duplicate
# grants; a store that comes back empty recreates the bucket empty and
# relearns: no fresh burst.
source "$(dirname "$0")/fleet_env.inc"

fl_netns down 42
R=3000 D=15000 # alpha: 3000 units/s, 5 s of burst
FL_BURST_A=5
fl_redis_start --appendonly yes --appendfsync always
for i in 1 2 3; do fl_policy "$i"; fl_start "$i"; done

rate() { awk -v a="$(fl_sum "$1")" -v b="$(fl_sum "$2")" -v t0="$3" -v t1="$4" 'BEGIN { printf "%.1f", (b - a) / (t1 - t0) }'; }
span() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
# decision: mean admission decision time (us) over all nodes since the snapshot "sum count ..."
decisions() { for i in 1 2 3; do echo "$(fl_metric "$i" fairgate_decision_seconds_sum) $(fl_metric "$i" fairgate_decision_seconds_count)"; done | tr '\n' ' '; }
mean_us() { printf '%s\n%s\n' "$1" "$2" | awk 'NR == 1 { for (i = 1; i <= NF; i++) a[i] = $i } NR == 2 { s = 0; n = 0; for (i = 1; i <= NF; i += 2) { s += $i - a[i]; n += $(i + 1) - a[i + 1] } printf "%.1f", n ? s / n * 1e6 : 0 }'; }
# the levels the nodes hold now (units), summed
held() { for i in 1 2 3; do fctl "$i" status --json | jq '.tenants[] | select(.name == "alpha") | [.bucket_units, 0] | max'; done | awk '{ s += $1 } END { printf "%.0f", s }'; }

# alpha at ~2x its contract on every node for the whole run; beta (the
# latency probe) in three segments: store up, store down, store back
for i in 1 2 3; do fl_load "$i" alpha "$FL_KEY_A" 15 52 "$FL_TMP/a$i.json"; done
sleep 8 # the burst is spent
for i in 1 2 3; do fl_load "$i" beta "$FL_KEY_B" 4 8 "$FL_TMP/up$i.json"; done
t1=$(date +%s.%N) b1=$(fl_billed_all alpha) d1=$(decisions)
sleep 8
t2=$(date +%s.%N) b2=$(fl_billed_all alpha) d2=$(decisions)
h2=$(held)
fl_redis_kill
for i in 1 2 3; do fl_load "$i" beta "$FL_KEY_B" 4 8 "$FL_TMP/down$i.json"; done
sleep 4
fctl 1 fleet --json >"$FL_TMP/down.json"
sleep 4
t3=$(date +%s.%N) b3=$(fl_billed_all alpha) d3=$(decisions)

up_rate=$(rate "$b1" "$b2" "$t1" "$t2")
down_rate=$(rate "$b2" "$b3" "$t2" "$t3")
check "store up: $up_rate units/s (contract 3000, within 5%)" fl_between 2850 "$up_rate" 3150
check "fairgatectl fleet: the store does not answer" jq -e '.reachable == false' "$FL_TMP/down.json"
expect_eq "after 2T without the store: fallback" \
	"$(jq -r '.tenants[] | select(.name == "alpha") | .mode' "$FL_TMP/down.json")" fallback
check "fallback = contract / 3 live nodes" \
	jq -e '.tenants[] | select(.name == "alpha") | (.rate_units_per_s - 1000 | fabs) < 1' "$FL_TMP/down.json"
# outage bound (fg_fleet_outage_bound_units): what the nodes held when it
# went, plus the contract per second and the slivers, plus per node a
# settlement excess of two requests (~150 units each)
ob=$(awk -v h="$h2" -v r=$R -v t="$(span "$t2" "$t3")" 'BEGIN { printf "%.0f", h + (r + 3 * 0.001 * r) * t + 3 * 300 }')
used=$(fl_sum "$(fl_diff "$b2" "$b3")")
check "store down $(span "$t2" "$t3") s: the fleet admits $used units, within the outage bound $ob (held $h2 + contract)" \
	float_le "$used" "$ob"
check "store down: still serving, $down_rate units/s (fail-static, not fail-closed)" fl_between 2400 "$down_rate" 3300
mu_up=$(mean_us "$d1" "$d2") mu_down=$(mean_us "$d2" "$d3")
check "admission decision: ${mu_down} us with the store down vs ${mu_up} us up" \
	awk -v a="$mu_down" -v b="$mu_up" 'BEGIN { exit !(a <= 1.5 * b + 20) }'
for i in 1 2 3; do
	read -r s1 ok1 _ p50a p99a <<<"$(fl_status "$FL_TMP/up$i.json")"
	read -r s2 ok2 _ p50b p99b <<<"$(fl_status "$FL_TMP/down$i.json")"
	check "node $i: beta served throughout ($ok1/$s1 up, $ok2/$s2 down; $(fl_outcomes "$FL_TMP/down$i.json"))" \
		test "$ok1" -eq "$s1" -a "$ok2" -eq "$s2"
	check "node $i: beta p50 ${p50b} ms with the store down vs ${p50a} ms up, p99 ${p99b} vs ${p99a}" \
		awk -v a="$p50b" -v b="$p50a" -v c="$p99b" -v d="$p99a" 'BEGIN { exit !(a <= 1.5 * b + 2 && c <= 2 * d + 10) }'
done

# back with its state: the same epoch; what the nodes used meanwhile is charged
fl_redis_start --appendonly yes --appendfsync always
sleep 8
t4=$(date +%s.%N) b4=$(fl_billed_all alpha)
after_rate=$(rate "$b3" "$b4" "$t3" "$t4")
fctl 1 fleet --json >"$FL_TMP/back.json"
check "back with its state: the same bucket (no epoch change)" \
	jq -e '.reachable and (.tenants[] | select(.name == "alpha") | .epoch_changes == 0 and .mode == "lease")' "$FL_TMP/back.json"
total=$(fl_sum "$(fl_diff "$b2" "$b4")")
bound=$(awk -v h="$h2" -v r=$R -v t="$(span "$t2" "$t4")" 'BEGIN { printf "%.0f", h + (r + 3 * 0.001 * r) * t + 3 * 300 }')
check "outage and after ($(span "$t2" "$t4") s): $total units, within held + contract ($bound): no duplicate grants" \
	float_le "$total" "$bound"
check "after it: $after_rate units/s, not above the contract" float_le "$after_rate" 3150

# back empty (the AOF gone): recreated empty, relearning, no fresh burst
fl_redis_kill
rm -rf "$FL_TMP/redis"
sleep 3
t5=$(date +%s.%N) b5=$(fl_billed_all alpha)
fl_redis_start
sleep 10
t6=$(date +%s.%N) b6=$(fl_billed_all alpha)
fl_wait_loads
check "a store that lost the bucket: the nodes recreate it empty and relearn" \
	grep -q "the store had lost its bucket; recreated empty" "$FL_TMP/agent1.log" "$FL_TMP/agent2.log" "$FL_TMP/agent3.log"
empty=$(fl_sum "$(fl_diff "$b5" "$b6")")
lim=$(awk -v r=$R -v t="$(span "$t5" "$t6")" 'BEGIN { printf "%.0f", 1.05 * r * t }')
check "after coming back empty: $empty units in $(span "$t5" "$t6") s, within the contract ($lim; a fresh burst would add $D)" \
	float_le "$empty" "$lim"
fctl 2 fleet --json >"$FL_TMP/empty.json"
check "fairgatectl fleet: node 2 saw a new epoch" \
	jq -e '.tenants[] | select(.name == "alpha") | .epoch_changes >= 1 and .store_recoveries >= 1' "$FL_TMP/empty.json"
for i in 1 2 3; do fl_stop_clean "$i"; done
