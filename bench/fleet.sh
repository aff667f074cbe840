#!/usr/bin/env bash
# fleet.sh BUILD_DIR — what agent.fleet costs a node, side by side in one
# run: two fairgated (--no-bpf, one CPU each the same way) in front of the
# same fairgate-sim, one with agent.fleet pointing at a real redis-server
# in the same namespace (TCP, period_s 2 and the other defaults), one
# without, with the same 100 tenants. Rounds interleave the two (the order
# alternates); in each, fg-load sends the same chat request open loop at
# RATE req/s spread over ACTIVE tenants, and the round reports per agent:
# the client's p50/p99 (2xx), the admission decision's mean cost
# (fairgate_decision_seconds), the agent process's CPU (all its threads,
# /proc/N/task/*/schedstat) per request and as a share of a CPU, and for the fleet agent the Redis calls and round trips
# (pipelined batches) per second and the grant thread's own CPU
# (fairgate_fleet_*). Medians over rounds with their range, and the median
# of the per-round ratios fleet / alone. An idle phase at the end gives the
# grant thread's cost with nothing to admit. Namespaces fgt-flb-*, removed
# on exit; Redis runs in a temp dir (its cwd too), killed by PID.
set -u
BUILD=$(cd "${1:-build}" && pwd)
[ "$(id -u)" -eq 0 ] || { echo "fleet bench: needs root (namespaces)"; exit 0; }
command -v redis-server >/dev/null || { echo "fleet bench: needs redis-server (scripts/deps.sh)"; exit 1; }
ROUNDS=${FG_BENCH_ROUNDS:-5} SECS=${FG_BENCH_SECONDS:-4} RATE=${FG_BENCH_RATE:-400}
ACTIVE=${FG_BENCH_ACTIVE:-10} TENANTS=100 IDLE_S=${FG_BENCH_IDLE_SECONDS:-6}
source "$(dirname "$0")/netpair.inc"
netpair flb 10.249.0
head -c 24 /dev/urandom | base64 >"$TMP/redis.pass"
chmod 600 "$TMP/redis.pass"

key() { echo "sk-flb-$1"; }
hash() { printf %s "$1" | sha256sum | cut -d' ' -f1; }
policy() { # PORT METRICS_PORT [FLEET] — 100 tenants, each far from its contract
	cat <<EOF
tiers:
  standard: {weight: 1, max_context: 32768, burst_s: 10, max_queue_s: 30, default_max_tokens: 16}
tenants:
EOF
	for t in $(seq "$TENANTS"); do
		printf '  - {name: t%d, tier: standard, units_per_s: 1000000, keys: ["sha256:%s"]}\n' \
			"$t" "$(hash "$(key "$t")")"
	done
	cat <<EOF
agent:
  listen: 0.0.0.0:$1
  engine: 127.0.0.1:8001
  metrics_listen: 127.0.0.1:$2
EOF
	[ -z "${3:-}" ] || echo "  fleet: {redis: \"127.0.0.1:6379\", node: bench, password_file: $TMP/redis.pass}"
}
policy 8000 9464 >"$TMP/alone.yaml"
policy 8002 9465 fleet >"$TMP/fleet.yaml"

start() { # LOG CMD...
	local log=$1; shift
	"$@" >"$log" 2>&1 &
	PIDS+=($!)
}
wait_port() {
	for _ in $(seq 150); do
		ip netns exec "$SNS" bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null && return 0
		sleep 0.1
	done
	echo "fleet bench: nothing listens on :$1"; tail -5 "$TMP"/*.log; exit 1
}
mkdir -p "$TMP/redis"
(cd "$TMP/redis" && exec ip netns exec "$SNS" redis-server --bind 127.0.0.1 --port 6379 --dir "$TMP/redis" \
	--save '' --appendonly no --pidfile '' --requirepass "$(cat "$TMP/redis.pass")" --daemonize no) \
	>"$TMP/redis.log" 2>&1 &
PIDS+=($!)
wait_port 6379
start "$TMP/sim.log" ip netns exec "$SNS" "$BUILD/fairgate-sim" --policy "$TMP/alone.yaml" \
	--listen 127.0.0.1:8001 --speedup 0
wait_port 8001
start "$TMP/alone.log" ip netns exec "$SNS" taskset -c 0 "$BUILD/fairgated" --policy "$TMP/alone.yaml" \
	--ctl "$TMP/alone.sock" --no-bpf
declare -A AGENT=([alone]=${PIDS[-1]}) PORT=([alone]=8000 [fleet]=8002) MPORT=([alone]=9464 [fleet]=9465)
start "$TMP/fleet.log" ip netns exec "$SNS" taskset -c 0 "$BUILD/fairgated" --policy "$TMP/fleet.yaml" \
	--ctl "$TMP/fleet.sock" --no-bpf
AGENT[fleet]=${PIDS[-1]}
wait_port 8000; wait_port 8002
grep -q "the store answers" "$TMP/fleet.log" || { echo "fleet bench: the fleet agent does not reach Redis"; tail -5 "$TMP/fleet.log"; exit 1; }

metric() { # AGENT NAME -> value (0 if absent)
	ip netns exec "$SNS" curl -sS --max-time 5 "http://127.0.0.1:${MPORT[$1]}/metrics" |
		awk -v m="$2" '$1 == m { v = $2 } END { print v + 0 }'
}
# CPU time of every thread of a process, ns (schedstat: finer than /proc/N/stat's ticks)
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%.0f", s }'; }
snapshot() { # AGENT -> "t cpu_ns decision_sum decision_count calls_ok batches thread_cpu"
	echo "$(date +%s.%N) $(cpu_ns "${AGENT[$1]}") $(metric "$1" fairgate_decision_seconds_sum)" \
		"$(metric "$1" fairgate_decision_seconds_count) $(metric "$1" 'fairgate_fleet_calls_total{result="ok"}')" \
		"$(metric "$1" fairgate_fleet_batches_total) $(metric "$1" fairgate_fleet_thread_cpu_seconds_total)"
}
load() { # AGENT -> "p50 p99 ok sent"
	local specs=() t per
	per=$(awk -v r="$RATE" -v n="$ACTIVE" 'BEGIN { printf "%g", r / n }')
	for t in $(seq "$ACTIVE"); do specs+=(--tenant "t$t:$(key "$t"):$per:400:16"); done
	ip netns exec "$CNS" "$BUILD/fg-load" --target "$SRV:${PORT[$1]}" --duration "$SECS" --connections 4 \
		"${specs[@]}" 2>/dev/null |
		jq -r '[.tenants[] | .latency_ms.p50] as $a | [.tenants[] | .latency_ms.p99] as $b |
			"\($a | sort | .[length / 2 | floor]) \($b | max) \([.tenants[] | .status["200"] // 0] | add) \([.tenants[].sent] | add)"'
}
median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
range() { sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%s-%s", lo, hi }'; }

echo "== agent.fleet: the same load through fairgated alone and with the fleet (Redis, period_s 2) =="
echo "   ($ROUNDS interleaved rounds of ${SECS}s; fg-load open loop, $RATE req/s over $ACTIVE of $TENANTS tenants;" \
	"both agents on CPU 0)"
load alone >/dev/null; load fleet >/dev/null # warm: connections, the fleet's first leases
# the 90 tenants that never speak make their start-up calls (the first
# lease, then "idle" once, T later): past them before measuring
sleep 5
AGENTS=(alone fleet)
for r in $(seq "$ROUNDS"); do
	for i in 0 1; do
		a=${AGENTS[$(((i + r) % 2))]}
		s0=$(snapshot "$a")
		read -r p50 p99 ok sent <<<"$(load "$a")"
		s1=$(snapshot "$a")
		[ "$ok" = "$sent" ] || echo "   warning: $a round $r: $ok of $sent requests answered 200"
		printf '%s\n%s\n' "$s0" "$s1" | awk -v n="$ok" -v r="$r" -v p50="$p50" -v p99="$p99" '
			NR == 1 { split($0, a) } NR == 2 { dt = $1 - a[1]
				printf "%s %.3f %.3f %.3f %.2f %.2f %.2f %.6f %.2f\n", r, p50, p99,
					($4 > a[4]) ? ($3 - a[3]) / ($4 - a[4]) * 1e6 : 0,
					n ? ($2 - a[2]) / 1e3 / n : 0, ($5 - a[5]) / dt, ($6 - a[6]) / dt, ($7 - a[7]) / dt,
					($2 - a[2]) / 1e9 / dt * 100 }' \
			>>"$TMP/round.$a"
	done
done
col() { awk -v c="$2" '{ print $c }' "$TMP/round.$1"; }
printf '%-6s %9s %9s %12s %12s %10s %9s %10s %14s\n' agent "p50 ms" "p99 ms" "decision us" "CPU us/req" \
	"agent CPU%" "calls/s" "batches/s" "thread CPU %"
for a in "${AGENTS[@]}"; do
	printf '%-6s %9s %9s %12s %12s %10s %9s %10s %14s\n' "$a" "$(col "$a" 2 | median)" "$(col "$a" 3 | median)" \
		"$(col "$a" 4 | median)" "$(col "$a" 5 | median)" "$(col "$a" 9 | median)" "$(col "$a" 6 | median)" \
		"$(col "$a" 7 | median)" "$(col "$a" 8 | median | awk '{ printf "%.3f", $1 * 100 }')"
done
ratios() { # COLUMN -> per-round fleet / alone, sorted
	awk -v c="$1" 'NR == FNR { f[$1] = $c; next } $1 in f && $c > 0 { printf "%.3f\n", f[$1] / $c }' \
		"$TMP/round.fleet" "$TMP/round.alone" | sort -g
}
for c in 2:p50 3:p99 4:decision 5:CPU/request; do
	R=$(ratios "${c%%:*}")
	printf 'fleet / alone, %s: %sx (median of per-round ratios; range %s)\n' "${c#*:}" "$(median <<<"$R")" "$(range <<<"$R")"
done
printf 'fleet agent under load: %s Redis calls/s (range %s) in %s round trips/s, grant thread %s%% of a CPU\n' \
	"$(col fleet 6 | median)" "$(col fleet 6 | range)" "$(col fleet 7 | median)" \
	"$(col fleet 8 | median | awk '{ printf "%.3f", $1 * 100 }')"

# idle: $ACTIVE tenants just went quiet, the others never spoke; both
# agents side by side over the same seconds
sleep 2
s0=$(snapshot fleet) q0=$(snapshot alone); sleep "$IDLE_S"; s1=$(snapshot fleet) q1=$(snapshot alone)
printf '%s\n%s\n%s\n%s\n' "$s0" "$s1" "$q0" "$q1" | awk 'NR == 1 { split($0, a) } NR == 3 { split($0, q) }
	NR == 2 { dt = $1 - a[1]; calls = ($5 - a[5]) / dt; trips = ($6 - a[6]) / dt; th = ($7 - a[7]) / dt * 100
		cpu = ($2 - a[2]) / 1e9 / dt * 100 }
	NR == 4 { printf "idle (%.0f s): fleet agent %.2f Redis calls/s in %.2f round trips/s, grant thread %.3f%% of a CPU; agent CPU %.2f%% with the fleet, %.2f%% alone\n",
		dt, calls, trips, th, cpu, ($2 - q[2]) / 1e9 / ($1 - q[1]) * 100 }'
