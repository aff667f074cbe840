#!/usr/bin/env bash
# workers.sh BUILD_DIR — requests/s through fairgated with agent.workers 1
# and 2, side by side in one run, in two cases:
#  1. engine-bound: two agents (--no-bpf) in front of one fairgate-sim
#     (--speedup 0), the same small chat request from wrk (2 threads, 64
#     connections, closed loop);
#  2. proxy-bound: two more agents in front of a do-nothing upstream (an
#     nginx answering one fixed completion, bench/netpair.inc's sink), chat
#     requests of FG_BENCH_WORKERS_BODY bytes (256 KiB), so the agent's own
#     CPU (reading, the body's check, forwarding) is what a request costs.
# Each case: rounds interleaved (the order alternates), medians and ranges
# of req/s and of each agent's CPU use (its process's user + sys time over
# the run's wall time: above 1.0 = more than one core), and the median and
# range of each round's 2-worker/1-worker req/s ratio.
# FG_BENCH_WORKERS_ROUNDS (3), FG_BENCH_SECONDS (3).
#
# What it can show on this 2-core machine: whether a second worker runs at
# all (CPU above one core) and what the shared lock serialises (every
# callback, I/O included: docs/design.md, "Workers"); not scaling: wrk and
# the upstream need the same two cores.
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
# the proxy-bound case: a tier and a KV pool that hold a 256 KiB prompt, the
# engine window opened all the way (the do-nothing upstream publishes no
# metrics: bench/proxy.sh says why that matters), upstream the sink
policy_body() { # WORKERS PORT METRICS_PORT
	cat <<EOF
replica: {kv_pool_tokens: 8000000}
tiers:
  wide: {burst_s: 60, default_max_tokens: 16, max_context: 4000000, kv_cap_tokens: 8000000}
tenants:
  - name: bench
    tier: wide
    units_per_s: 1000000000000
    keys: ["sha256:$(printf %s $KEY | sha256sum | cut -d' ' -f1)"]
agent:
  listen: 0.0.0.0:$2
  engine: 127.0.0.1:8003
  metrics_listen: 127.0.0.1:$3
  salt_secret_file: $TMP/salt.key
  engine_queue_steps: 1000
  workers: $1
EOF
}
policy_body 1 8010 9466 >"$TMP/b1.yaml"
policy_body 2 8012 9467 >"$TMP/b2.yaml"
mkdir -p "$TMP/sink/logs"
nginx_sink_conf "$TMP/sink" 8003 >"$TMP/sink/nginx.conf"

netpair_start "$TMP/sim.log" ip netns exec "$SNS" "$BUILD/fairgate-sim" --policy "$TMP/w1.yaml" \
	--listen 127.0.0.1:8001 --speedup 0
netpair_start "$TMP/w1.log" ip netns exec "$SNS" "$BUILD/fairgated" --policy "$TMP/w1.yaml" \
	--ctl "$TMP/ctl1.sock" --no-bpf
declare -A AGENT=([w1]=${PIDS[-1]})
netpair_start "$TMP/w2.log" ip netns exec "$SNS" "$BUILD/fairgated" --policy "$TMP/w2.yaml" \
	--ctl "$TMP/ctl2.sock" --no-bpf
AGENT[w2]=${PIDS[-1]}
netpair_start "$TMP/sink.log" ip netns exec "$SNS" nginx -p "$TMP/sink" -c "$TMP/sink/nginx.conf"
for w in b1 b2; do
	netpair_start "$TMP/$w.log" ip netns exec "$SNS" "$BUILD/fairgated" --policy "$TMP/$w.yaml" \
		--ctl "$TMP/ctl-$w.sock" --no-bpf
	AGENT[$w]=${PIDS[-1]}
done
declare -A PORT=([w1]=8000 [w2]=8002 [b1]=8010 [b2]=8012)
for p in 8001 8000 8002 8003 8010 8012; do netpair_wait_port $p; done
for w in w2 b2; do
	grep -q '2 workers' "$TMP/$w.log" || { echo "workers bench: agent $w did not start 2 workers"; exit 1; }
done

BODY='{"model":"llama-3.3-70b","messages":[{"role":"user","content":"What is the capital of France? Answer in one short sentence."}],"max_tokens":16}'
cat >"$TMP/post.lua" <<EOF
wrk.method = "POST"
wrk.body = '$BODY'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $KEY"
EOF
SIZE=${FG_BENCH_WORKERS_BODY:-262144}
chat_body_files "$TMP/body" "$SIZE" "$KEY"
# the same size of text dense in JSON escapes, which the body check reads
# slowest (~1.5 ms a MiB): the case where the check is most of the work
chat_body_files "$TMP/esc" "$SIZE" "$KEY" 'a\"b\\c\nd\u00e9 '
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
run() { # AGENT SECS LUA -> "req/s cores non2xx"
	local t0 t1 out hz
	hz=$(getconf CLK_TCK)
	t0=$(cpu_ticks "${AGENT[$1]}")
	out=$(ip netns exec "$CNS" wrk -t2 -c64 -d"${2}s" -s "$3" \
		"http://$SRV:${PORT[$1]}/v1/chat/completions")
	t1=$(cpu_ticks "${AGENT[$1]}")
	echo "$out" >>"$TMP/wrk.out"
	echo "$out" | awk -v d=$((t1 - t0)) -v hz="$hz" -v s="$2" '
		/^Requests\/sec:/ { r = $2 } /Non-2xx/ { bad = $NF }
		END { printf "%s %.2f %d\n", r, d / hz / s, bad }'
}
median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

range() { sort -g | awk -v f="$1" 'NR == 1 { lo = $1 } { hi = $1 } END { printf f "-" f, lo, hi }'; }
# compare ONE TWO LUA TITLE: the 1-worker agent ONE and the 2-worker agent
# TWO under the same load, rounds interleaved
compare() {
	local one=$1 two=$2 lua=$3 r order w rps cores bad ratios
	rm -f "$TMP"/rps.* "$TMP"/cores.* "$TMP"/round.* # a case's figures only
	echo "== workers, $4: req/s through fairgated with agent.workers 1 and 2 (wrk -t2 -c64, $ROUNDS interleaved rounds of ${SECS}s) =="
	run "$one" 1 "$lua" >/dev/null; run "$two" 1 "$lua" >/dev/null # warm: pools, caches
	for r in $(seq "$ROUNDS"); do
		order="$one $two"; [ $((r % 2)) -eq 0 ] && order="$two $one"
		for w in $order; do
			read -r rps cores bad <<<"$(run "$w" "$SECS" "$lua")"
			[ "${bad:-0}" -eq 0 ] || echo "   warning: $w round $r: $bad non-2xx answers"
			echo "$rps" >>"$TMP/rps.$w"; echo "$cores" >>"$TMP/cores.$w"; echo "$r $rps" >>"$TMP/round.$w"
			echo "   round $r: workers=${w#?} $rps req/s, agent CPU $cores cores"
		done
	done
	ratios=$(awk 'NR == FNR { a[$1] = $2; next } $1 in a && a[$1] > 0 { printf "%.3f\n", $2 / a[$1] }' \
		"$TMP/round.$one" "$TMP/round.$two" | sort -g)
	printf '%-8s %10s %14s %14s %12s\n' workers "req/s" "(range)" "agent cores" "(range)"
	for w in "$one" "$two"; do
		printf '%-8s %10.0f %14s %14.2f %12s\n' "${w#?}" "$(median <"$TMP/rps.$w")" \
			"$(range %.0f <"$TMP/rps.$w")" "$(median <"$TMP/cores.$w")" "$(range %.2f <"$TMP/cores.$w")"
	done
	awk -v m="$(median <<<"$ratios")" -v lo="$(head -1 <<<"$ratios")" -v hi="$(tail -1 <<<"$ratios")" 'BEGIN {
		printf "2 workers vs 1: %.2fx the req/s (median of per-round ratios; range %.2f-%.2f)\n", m, lo, hi }'
}
compare w1 w2 "$TMP/post.lua" "engine-bound (fairgate-sim, a small chat request)"
echo
compare b1 b2 "$TMP/body.lua" "proxy-bound (do-nothing upstream, $SIZE-byte chat bodies)"
echo
compare b1 b2 "$TMP/esc.lua" "check-bound (do-nothing upstream, $SIZE-byte chat bodies dense in JSON escapes)"
