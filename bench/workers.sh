#!/usr/bin/env bash
# workers.sh BUILD_DIR — requests/s through fairgated with agent.workers 1,
# 2 and 4, side by side in one run, in three cases:
#  1. engine-bound: agents (--no-bpf) in front of one fairgate-sim
#     (--speedup 0), the same small chat request from wrk (2 threads, 64
#     connections, closed loop);
#  2. proxy-bound: more agents in front of a do-nothing upstream (an
#     nginx answering one fixed completion, bench/netpair.inc's sink), chat
#     requests of FG_BENCH_WORKERS_BODY bytes (256 KiB), so the agent's own
#     CPU (reading, the body's check, forwarding) is what a request costs;
#  3. check-bound: the same with bodies dense in JSON escapes.
# Each case: rounds interleaved (the order rotates), medians and ranges
# of req/s and of each agent's CPU use (its process's user + sys time over
# the run's wall time: above 1.0 = more than one core), the median and
# range of each round's N-worker/1-worker req/s ratio, and for the agents
# with workers the shared lock's share: the time its workers held the
# lock per request (fairgate_worker_lock_held_seconds_total) against the
# agent's CPU per request. That share s is the serial part: N workers on N
# free cores run at most 1 / (s + (1 - s) / N) times one (Amdahl), printed
# for 4 and 16 (held time counts a holder the kernel preempted, so on a
# busy machine s reads high: the bound is a floor on what more cores give).
# FG_BENCH_WORKERS_ROUNDS (3), FG_BENCH_SECONDS (3).
#
# What it can show on this 2-core machine: whether a second worker runs at
# all (CPU above one core), what the shared lock serialises (docs/design.md,
# "Workers") and so what more cores could give; not scaling itself: wrk
# and the upstream need the same two cores, and 4 workers share 2.
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
policy 4 8004 9468 >"$TMP/w4.yaml"
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
policy_body 4 8014 9469 >"$TMP/b4.yaml"
mkdir -p "$TMP/sink/logs"
nginx_sink_conf "$TMP/sink" 8003 >"$TMP/sink/nginx.conf"

netpair_start "$TMP/sim.log" ip netns exec "$SNS" "$BUILD/fairgate-sim" --policy "$TMP/w1.yaml" \
	--listen 127.0.0.1:8001 --speedup 0
netpair_start "$TMP/sink.log" ip netns exec "$SNS" nginx -p "$TMP/sink" -c "$TMP/sink/nginx.conf"
declare -A AGENT
for w in w1 w2 w4 b1 b2 b4; do
	netpair_start "$TMP/$w.log" ip netns exec "$SNS" "$BUILD/fairgated" --policy "$TMP/$w.yaml" \
		--ctl "$TMP/ctl-$w.sock" --no-bpf
	AGENT[$w]=${PIDS[-1]}
done
declare -A PORT=([w1]=8000 [w2]=8002 [w4]=8004 [b1]=8010 [b2]=8012 [b4]=8014)
declare -A MPORT=([w1]=9464 [w2]=9465 [w4]=9468 [b1]=9466 [b2]=9467 [b4]=9469)
for p in 8001 8000 8002 8004 8003 8010 8012 8014; do netpair_wait_port $p; done
for w in w2 b2 w4 b4; do
	grep -q "${w#?} workers" "$TMP/$w.log" || { echo "workers bench: agent $w did not start ${w#?} workers"; exit 1; }
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
# the seconds all of an agent's workers have held the shared lock (0: one worker, no lock)
lock_held() {
	ip netns exec "$SNS" curl -s "http://127.0.0.1:${MPORT[$1]}/metrics" |
		awk '/^fairgate_worker_lock_held_seconds_total/ { s += $2 } END { printf "%.6f\n", s }'
}
# "own others handed_back": requests its workers sent to the engine after
# their passes, for their own connections and for each other's
sends() {
	ip netns exec "$SNS" curl -s "http://127.0.0.1:${MPORT[$1]}/metrics" | awk '
		/^fairgate_worker_engine_sends_total/ { if ($1 ~ /for="own"/) o += $2; else t += $2 }
		/^fairgate_worker_engine_sends_handed_back_total/ { b += $2 }
		END { printf "%d %d %d\n", o, t, b }'
}
run() { # AGENT SECS LUA -> "req/s cores non2xx held_s"
	local t0 t1 h0 h1 out hz
	hz=$(getconf CLK_TCK)
	h0=$(lock_held "$1")
	t0=$(cpu_ticks "${AGENT[$1]}")
	out=$(ip netns exec "$CNS" wrk -t2 -c64 -d"${2}s" -s "$3" \
		"http://$SRV:${PORT[$1]}/v1/chat/completions")
	t1=$(cpu_ticks "${AGENT[$1]}")
	h1=$(lock_held "$1")
	echo "$out" >>"$TMP/wrk.out"
	echo "$out" | awk -v d=$((t1 - t0)) -v hz="$hz" -v s="$2" -v h="$(awk -v a="$h0" -v b="$h1" 'BEGIN { print b - a }')" '
		/^Requests\/sec:/ { r = $2 } /Non-2xx/ { bad = $NF }
		END { printf "%s %.2f %d %.6f\n", r, d / hz / s, bad, h }'
}
median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

range() { sort -g | awk -v f="$1" 'NR == 1 { lo = $1 } { hi = $1 } END { printf f "-" f, lo, hi }'; }
# compare LUA TITLE ONE MORE...: the 1-worker agent ONE and the agents
# with workers MORE under the same load, rounds interleaved (the order
# rotates by round)
compare() {
	local lua=$1 title=$2 one=$3 r order w rps cores bad held ratios i
	shift 3
	local all=("$one" "$@")
	rm -f "$TMP"/rps.* "$TMP"/cores.* "$TMP"/round.* "$TMP"/share.* "$TMP"/heldus.* # a case's figures only
	declare -A sends0
	for w in "$@"; do sends0[$w]=$(sends "$w"); done
	echo "== workers, $title: req/s through fairgated with agent.workers ${all[*]#?} (wrk -t2 -c64, $ROUNDS interleaved rounds of ${SECS}s) =="
	for w in "${all[@]}"; do run "$w" 1 "$lua" >/dev/null; done # warm: pools, caches
	for r in $(seq "$ROUNDS"); do
		order=()
		for i in "${!all[@]}"; do order+=("${all[$(((i + r - 1) % ${#all[@]}))]}"); done
		for w in "${order[@]}"; do
			read -r rps cores bad held <<<"$(run "$w" "$SECS" "$lua")"
			[ "${bad:-0}" -eq 0 ] || echo "   warning: $w round $r: $bad non-2xx answers"
			echo "$rps" >>"$TMP/rps.$w"; echo "$cores" >>"$TMP/cores.$w"; echo "$r $rps" >>"$TMP/round.$w"
			if [ "$w" != "$one" ]; then
				# per request: lock held and agent CPU, in us; their ratio
				awk -v h="$held" -v c="$cores" -v s="$SECS" -v n="$rps" 'BEGIN {
					if (n > 0 && c > 0) { printf "%.2f\n", h * 1e6 / (n * s) >> "'"$TMP/heldus.$w"'";
						printf "%.3f\n", h / (c * s) >> "'"$TMP/share.$w"'" } }'
			fi
			echo "   round $r: workers=${w#?} $rps req/s, agent CPU $cores cores${held:+, lock held ${held} s}"
		done
	done
	printf '%-8s %10s %14s %12s %12s %10s %8s %14s\n' workers "req/s" "(range)" "agent cores" "(range)" \
		"lock us/req" "share" "bound 4/16"
	for w in "${all[@]}"; do
		local lk=- sh=- bd=-
		if [ -s "$TMP/share.$w" ]; then
			lk=$(median <"$TMP/heldus.$w")
			sh=$(median <"$TMP/share.$w")
			bd=$(awk -v s="$sh" 'BEGIN { if (s > 1) s = 1; printf "%.2fx/%.2fx", 1 / (s + (1 - s) / 4), 1 / (s + (1 - s) / 16) }')
		fi
		printf '%-8s %10.0f %14s %12.2f %12s %10s %8s %14s\n' "${w#?}" "$(median <"$TMP/rps.$w")" \
			"$(range %.0f <"$TMP/rps.$w")" "$(median <"$TMP/cores.$w")" "$(range %.2f <"$TMP/cores.$w")" \
			"$lk" "$sh" "$bd"
	done
	for w in "$@"; do
		ratios=$(awk 'NR == FNR { a[$1] = $2; next } $1 in a && a[$1] > 0 { printf "%.3f\n", $2 / a[$1] }' \
			"$TMP/round.$one" "$TMP/round.$w" | sort -g)
		awk -v n="${w#?}" -v m="$(median <<<"$ratios")" -v lo="$(head -1 <<<"$ratios")" -v hi="$(tail -1 <<<"$ratios")" 'BEGIN {
			printf "%s workers vs 1: %.2fx the req/s (median of per-round ratios; range %.2f-%.2f)\n", n, m, lo, hi }'
	done
	for w in "$@"; do
		read -r o0 t0 b0 <<<"${sends0[$w]}"
		read -r o1 t1 b1 <<<"$(sends "$w")"
		awk -v n="${w#?}" -v o=$((o1 - o0)) -v t=$((t1 - t0)) -v b=$((b1 - b0)) 'BEGIN {
			printf "%s workers: %d requests sent after a pass, %.0f%% of them by a worker for another'"'"'s connections (%d handed back unfinished)\n",
				n, o + t, o + t ? 100 * t / (o + t) : 0, b }'
	done
}
compare "$TMP/post.lua" "engine-bound (fairgate-sim, a small chat request)" w1 w2 w4
echo
compare "$TMP/body.lua" "proxy-bound (do-nothing upstream, $SIZE-byte chat bodies)" b1 b2 b4
echo
compare "$TMP/esc.lua" "check-bound (do-nothing upstream, $SIZE-byte chat bodies dense in JSON escapes)" b1 b2 b4
