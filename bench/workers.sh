#!/usr/bin/env bash
# workers.sh BUILD_DIR — requests/s through fairgated with agent.workers 1
# and 2, side by side in one run: two agents (--no-bpf) in front of one
# fairgate-sim (--speedup 0), the same chat request from wrk (2 threads, 64
# connections, closed loop), rounds interleaved (the order alternates),
# medians of req/s and of each agent's CPU use (its process's user + sys
# time over the run's wall time: above 1.0 = more than one core), and the
# median and range of each round's 2-worker/1-worker req/s ratio.
# FG_BENCH_WORKERS_ROUNDS (3), FG_BENCH_SECONDS (3).
#
# What it can show on this 2-core machine: whether a second worker runs at
# all (CPU above one core) and what the shared lock costs; not scaling: the
# simulator and wrk need the same two cores, and with one lock around every
# callback (docs/design.md, "Workers") the workers take turns.
# Everything runs in namespaces it creates (fgt-wkb-*) and is removed on exit.
set -u
BUILD=$(cd "${1:-build}" && pwd)
[ "$(id -u)" -eq 0 ] || { echo "workers bench: needs root (namespaces)"; exit 0; }
command -v wrk >/dev/null || { echo "workers bench: needs wrk (scripts/deps.sh --bench)"; exit 1; }
ROUNDS=${FG_BENCH_WORKERS_ROUNDS:-3} SECS=${FG_BENCH_SECONDS:-3}
source "$(dirname "$0")/netpair.inc"
netpair wkb 10.253.0
head -c 32 /dev/urandom >"$TMP/salt.key"
chmod 600 "$TMP/salt.key"

KEY=sk-bench
policy() { # WORKERS PORT METRICS_PORT
	cat <<EOF
tiers:
  standard: {burst_s: 60, default_max_tokens: 16}
tenants:
  - name: bench
    tier: standard
    units_per_s: 1000000000
    keys: ["sha256:$(printf %s $KEY | sha256sum | cut -d' ' -f1)"]
agent:
  listen: 0.0.0.0:$2
  engine: 127.0.0.1:8001
  metrics_listen: 127.0.0.1:$3
  salt_secret_file: $TMP/salt.key
  workers: $1
EOF
}
policy 1 8000 9464 >"$TMP/w1.yaml"
policy 2 8002 9465 >"$TMP/w2.yaml"

netpair_start "$TMP/sim.log" ip netns exec "$SNS" "$BUILD/fairgate-sim" --policy "$TMP/w1.yaml" \
	--listen 127.0.0.1:8001 --speedup 0
netpair_start "$TMP/w1.log" ip netns exec "$SNS" "$BUILD/fairgated" --policy "$TMP/w1.yaml" \
	--ctl "$TMP/ctl1.sock" --no-bpf
declare -A AGENT=([w1]=${PIDS[-1]})
netpair_start "$TMP/w2.log" ip netns exec "$SNS" "$BUILD/fairgated" --policy "$TMP/w2.yaml" \
	--ctl "$TMP/ctl2.sock" --no-bpf
AGENT[w2]=${PIDS[-1]}
declare -A PORT=([w1]=8000 [w2]=8002)
netpair_wait_port 8001; netpair_wait_port 8000; netpair_wait_port 8002
grep -q '2 workers' "$TMP/w2.log" || { echo "workers bench: the 2-worker agent did not start 2 workers"; exit 1; }

BODY='{"model":"llama-3.3-70b","messages":[{"role":"user","content":"What is the capital of France? Answer in one short sentence."}],"max_tokens":16}'
cat >"$TMP/post.lua" <<EOF
wrk.method = "POST"
wrk.body = '$BODY'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $KEY"
EOF
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
run() { # w1|w2 SECS -> "req/s cores non2xx"
	local t0 t1 out hz
	hz=$(getconf CLK_TCK)
	t0=$(cpu_ticks "${AGENT[$1]}")
	out=$(ip netns exec "$CNS" wrk -t2 -c64 -d"${2}s" -s "$TMP/post.lua" \
		"http://$SRV:${PORT[$1]}/v1/chat/completions")
	t1=$(cpu_ticks "${AGENT[$1]}")
	echo "$out" >>"$TMP/wrk.out"
	echo "$out" | awk -v d=$((t1 - t0)) -v hz="$hz" -v s="$2" '
		/^Requests\/sec:/ { r = $2 } /Non-2xx/ { bad = $NF }
		END { printf "%s %.2f %d\n", r, d / hz / s, bad }'
}
median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

echo "== workers: req/s through fairgated with agent.workers 1 and 2 (wrk -t2 -c64, $ROUNDS interleaved rounds of ${SECS}s) =="
run w1 1 >/dev/null; run w2 1 >/dev/null # warm: pools, caches
for r in $(seq "$ROUNDS"); do
	order="w1 w2"; [ $((r % 2)) -eq 0 ] && order="w2 w1"
	for w in $order; do
		read -r rps cores bad <<<"$(run "$w" "$SECS")"
		[ "${bad:-0}" -eq 0 ] || echo "   warning: $w round $r: $bad non-2xx answers"
		echo "$rps" >>"$TMP/rps.$w"; echo "$cores" >>"$TMP/cores.$w"; echo "$r $rps" >>"$TMP/round.$w"
		echo "   round $r: workers=${w#w} $rps req/s, agent CPU $cores cores"
	done
done
RATIOS=$(awk 'NR == FNR { a[$1] = $2; next } $1 in a && a[$1] > 0 { printf "%.3f\n", $2 / a[$1] }' \
	"$TMP/round.w1" "$TMP/round.w2" | sort -g)
printf '%-8s %10s %14s\n' workers "req/s" "agent cores"
for w in w1 w2; do
	printf '%-8s %10.0f %14.2f\n' "${w#w}" "$(median <"$TMP/rps.$w")" "$(median <"$TMP/cores.$w")"
done
awk -v m="$(median <<<"$RATIOS")" -v lo="$(head -1 <<<"$RATIOS")" -v hi="$(tail -1 <<<"$RATIOS")" 'BEGIN {
	printf "2 workers vs 1: %.2fx the req/s (median of per-round ratios; range %.2f-%.2f)\n", m, lo, hi }'
