#!/usr/bin/env bash
# tenants.sh BUILD_DIR — does a request cost more when the policy has more
# tenants? (`make bench` runs it through bench/run.sh.) The same fairgated
# binary, three processes side by side in one run, each with a policy of 3,
# 1,000 or 65,536 tenants (FG_BENCH_TENANT_COUNTS), all pinned to CPU 0 in
# front of one do-nothing upstream (an nginx answering a fixed completion,
# on CPU 1). The load is the same for each: wrk (1 thread, 32 connections,
# closed loop) sending bench/proxy.sh's chat request round robin over the
# same 3 active tenants; in the bigger policies these sit at the first, the
# middle and the last id and every other tenant is idle with a key of its
# own (so a walk over all tenants, or over one end of them, shows). The
# figure is the proxy process's CPU time (user + sys, all threads, from
# /proc) per request over each wrk run; rounds interleave the three (the
# order rotates), and each round's figure is divided by that round's
# 3-tenant one: the median and range of those ratios are printed (target:
# flat, 1.00x). A policy's tenants are generated here (awk; the idle ones'
# key hashes are random bytes, spread as SHA-256's are, no key matches
# them). FG_BENCH_TENANT_ROUNDS (3)
# and FG_BENCH_TENANT_SECONDS (FG_BENCH_SECONDS, 3). A round with any
# non-2xx answer makes the bench fail: a refused request costs less than a
# proxied one, and would flatter that policy. Namespaces fgt-tnb-*, removed
# on exit.
set -u
BUILD=$(cd "${1:-build}" && pwd)
[ "$(id -u)" -eq 0 ] || { echo "tenants bench: needs root (namespaces)"; exit 0; }
command -v wrk >/dev/null && command -v nginx >/dev/null ||
	{ echo "tenants bench: needs wrk and nginx (scripts/deps.sh --bench)"; exit 1; }
ROUNDS=${FG_BENCH_TENANT_ROUNDS:-3} SECS=${FG_BENCH_TENANT_SECONDS:-${FG_BENCH_SECONDS:-3}}
read -ra COUNTS <<<"${FG_BENCH_TENANT_COUNTS:-3 1000 65536}"
ON_PROXY="taskset -c 0"
source "$(dirname "$0")/netpair.inc"
netpair tnb 10.248.0
head -c 32 /dev/urandom >"$TMP/salt.key"
chmod 600 "$TMP/salt.key"

start() { # LOG CMD...
	local log=$1; shift
	"$@" >"$log" 2>&1 &
	PIDS+=($!)
}
wait_port() { # PORT [TRIES of 0.1 s]
	for _ in $(seq "${2:-100}"); do
		ip netns exec "$SNS" bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null && return 0
		sleep 0.1
	done
	echo "tenants bench: nothing listens on :$1"; tail -n 5 "$TMP"/*.log; exit 1
}

# the do-nothing upstream, off the proxies' CPU
mkdir -p "$TMP/sink/logs"
nginx_sink_conf "$TMP/sink" 8002 >"$TMP/sink/nginx.conf"
start "$TMP/sink.log" ip netns exec "$SNS" taskset -c 1 nginx -p "$TMP/sink" -c "$TMP/sink/nginx.conf"

# policy N PORT METRICS_PORT — N tenants; the active ones (keys sk-tnb-0..2)
# at ids 0, N/2 and N-1
KEYS=(sk-tnb-0 sk-tnb-1 sk-tnb-2)
HASHES=()
for k in "${KEYS[@]}"; do HASHES+=("$(printf %s "$k" | sha256sum | cut -d' ' -f1)"); done
policy() {
	tenants_head
	random_hashes "$1" | # the idle tenants' key hashes
		awk -v n="$1" -v h0="${HASHES[0]}" -v h1="${HASHES[1]}" -v h2="${HASHES[2]}" '
		BEGIN { a[0] = h0; a[int(n / 2)] = h1; a[n - 1] = h2 }
		{
			i = NR - 1
			if (i in a) { h = a[i]; rate = 1000000000 } else { h = $0; rate = 100 }
			printf "  - {name: t%05d, tier: standard, units_per_s: %d, keys: [\"sha256:%s\"]}\n", i, rate, h
		}'
	cat <<EOF
agent:
  listen: 0.0.0.0:$2
  engine: 127.0.0.1:8002
  metrics_listen: 127.0.0.1:$3
  salt_secret_file: $TMP/salt.key
EOF
}
declare -A PORT PID
for i in "${!COUNTS[@]}"; do
	n=${COUNTS[$i]}
	[[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 3 ] || { echo "tenants bench: a tenant count must be 3 or more, not '$n'"; exit 1; }
	PORT[$n]=$((8010 + i))
	policy "$n" "${PORT[$n]}" $((9470 + i)) >"$TMP/policy.$n.yaml"
	start "$TMP/agent.$n.log" ip netns exec "$SNS" $ON_PROXY "$BUILD/fairgated" --policy "$TMP/policy.$n.yaml" \
		--ctl "$TMP/ctl.$n.sock" --no-bpf
	PID[$n]=${PIDS[-1]}
done
wait_port 8002
# a 65,536-tenant policy takes the agent ~1 s to parse and set up
for n in "${COUNTS[@]}"; do wait_port "${PORT[$n]}" 300; done

BODY='{"model":"llama-3.3-70b","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"What is the capital of France? Answer in one short sentence."}],"max_tokens":16}'
cat >"$TMP/post.lua" <<EOF
local keys = {"${KEYS[0]}", "${KEYS[1]}", "${KEYS[2]}"}
local body = '$BODY'
local i = 0
request = function()
	i = i + 1
	return wrk.format("POST", "/v1/chat/completions", {["Content-Type"] = "application/json",
		["Authorization"] = "Bearer " .. keys[i % 3 + 1]}, body)
end
EOF
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
# perf stat on the agent's pid (all its threads) over each measured run:
# instructions per request do not depend on what else the shared machine
# runs, as CPU time does. FG_BENCH_TENANT_EVENTS adds events (e.g.
# cycles,dTLB-load-misses,cache-misses), each printed per request as well.
PERF_EVENTS=instructions${FG_BENCH_TENANT_EVENTS:+,$FG_BENCH_TENANT_EVENTS}
IFS=, read -ra EVENTS <<<"$PERF_EVENTS"
HAVE_PERF=0
if command -v perf >/dev/null && perf stat -e "$PERF_EVENTS" -x, -o /dev/null true 2>/dev/null; then
	HAVE_PERF=1
fi
perf_start() { # PID OUT
	perf stat -e "$PERF_EVENTS" -x, -o "$2" -p "$1" 2>/dev/null &
	PERF_PID=$!
	# perf writes nothing until it stops: give it time to attach to every thread
	sleep 0.3
}
perf_stop() { # OUT -> the events' counts, in EVENTS' order ("n/a" when not counted)
	kill -INT "$PERF_PID" 2>/dev/null
	wait "$PERF_PID" 2>/dev/null
	local e
	for e in "${EVENTS[@]}"; do
		awk -F, -v e="$e" '$3 == e || $3 ~ "^" e ":" { v = $1 } END { print (v ~ /^[0-9]+$/) ? v : "n/a" }' "$1"
	done | paste -sd' '
}
# times the agent went to sleep (voluntary context switches, all threads): an
# agent woken per request pays a context switch each time
sleeps() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/^voluntary_ctxt_switches:/ { s += $2 } END { print s + 0 }'; }
run() { # COUNT SECS -> "cpu-us-per-request requests non2xx sleeps-per-request event-per-request..."
	local t0 t1 s0 s1 out counts
	[ "$HAVE_PERF" = 1 ] && perf_start "${PID[$1]}" "$TMP/perf.out"
	t0=$(cpu_ticks "${PID[$1]}") s0=$(sleeps "${PID[$1]}")
	out=$(ip netns exec "$CNS" wrk -t1 -c32 -d"${2}s" -s "$TMP/post.lua" "http://$SRV:${PORT[$1]}/v1/chat/completions")
	t1=$(cpu_ticks "${PID[$1]}") s1=$(sleeps "${PID[$1]}")
	counts=$(printf 'n/a %.0s' "${EVENTS[@]}")
	[ "$HAVE_PERF" = 1 ] && counts=$(perf_stop "$TMP/perf.out")
	echo "$out" | awk -v d=$((t1 - t0)) -v s=$((s1 - s0)) -v hz="$(getconf CLK_TCK)" -v c="$counts" '
		/requests in/ { n = $1 } /Non-2xx/ { bad = $NF }
		END {
			printf "%.1f %d %d %.2f", n ? d / hz * 1e6 / n : 0, n, bad, n ? s / n : 0
			k = split(c, v, " ")
			for (i = 1; i <= k; i++) printf (v[i] == "n/a" || !n) ? " n/a" : " %.1f", v[i] / n
			printf "\n"
		}'
}

echo "== CPU per request by tenant count: the same fairgated, the same load over 3 active tenants =="
echo "   (${COUNTS[*]} tenants; $ROUNDS interleaved rounds of ${SECS}s, order rotating; wrk -c32;" \
	"proxies on CPU 0, a do-nothing upstream on CPU 1)"
for n in "${COUNTS[@]}"; do run "$n" 1 >/dev/null; done # warm
bad_rounds=0
for r in $(seq "$ROUNDS"); do
	for i in "${!COUNTS[@]}"; do
		n=${COUNTS[$(((i + r) % ${#COUNTS[@]}))]}
		read -r cpu reqs bad slp evs <<<"$(run "$n" "$SECS")"
		echo "$r $cpu" >>"$TMP/cpu.$n"
		read -ra ev <<<"$evs"
		for k in "${!EVENTS[@]}"; do echo "$r ${ev[$k]}" >>"$TMP/ev$k.$n"; done
		echo "$slp" >>"$TMP/sleeps.$n"
		echo "$reqs" >>"$TMP/reqs.$n"
		if [ "$bad" != 0 ] || [ "$reqs" = 0 ]; then
			echo "   error: $n tenants, round $r: $bad of $reqs answered non-2xx"
			bad_rounds=$((bad_rounds + 1))
		fi
	done
done
median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
range() { sort -g | awk '{ a[NR] = $1 } END { printf "%.2f-%.2f", a[1], a[NR] }'; }
base=${COUNTS[0]}
# ratio FILE: "median (range)" of each round's figure in FILE over that
# round's in the base count's file of the same name; n/a without figures
ratio() {
	local r
	r=$(awk 'NR == FNR { b[$1] = $2; next } $1 in b && b[$1] + 0 > 0 && $2 != "n/a" { printf "%.3f\n", $2 / b[$1] }' \
		"${1%.*}.$base" "$1")
	[ -n "$r" ] || { echo n/a; return; }
	echo "$(median <<<"$r" | awk '{ printf "%.2fx", $1 }') ($(range <<<"$r"))"
}
# figure FILE: "median (range)" of the figures, n/a without them
figure() {
	local v
	v=$(cut -d' ' -f2 "$1" | grep -v '^n/a$')
	[ -n "$v" ] || { echo n/a; return; }
	echo "$(median <<<"$v" | awk '{ printf "%.1f", $1 }') ($(range <<<"$v"))"
}
printf '%-8s %22s %12s %11s %24s %28s %24s\n' tenants "us/req median (range)" "req/s" "sleeps/req" \
	"CPU ratio to $base" "instructions/req (range)" "instr. ratio to $base"
for n in "${COUNTS[@]}"; do
	printf '%-8s %22s %12.0f %11.2f %24s %28s %24s\n' "$n" "$(figure "$TMP/cpu.$n")" \
		"$(awk -v s="$SECS" '{ print $1 / s }' "$TMP/reqs.$n" | median)" "$(median <"$TMP/sleeps.$n")" \
		"$(ratio "$TMP/cpu.$n")" "$(figure "$TMP/ev0.$n")" "$(ratio "$TMP/ev0.$n")"
done
for k in "${!EVENTS[@]}"; do
	[ "$k" = 0 ] && continue
	for n in "${COUNTS[@]}"; do
		printf '%-8s %22s per request: %-24s ratio to %s: %s\n' "$n" "${EVENTS[$k]}" "$(figure "$TMP/ev$k.$n")" \
			"$base" "$(ratio "$TMP/ev$k.$n")"
	done
done
echo "   (proxy CPU time and instructions (perf stat on the agent's pid, all threads; n/a without perf or its hardware counters)" \
	"per request: median and range over $ROUNDS rounds; req/s and sleeps (voluntary context switches) per" \
	"request: medians; ratios: median and range of each round's figure over that round's $base-tenant one)"
# FG_BENCH_TENANT_RECORD=DIR: after the rounds, one more run of each agent
# under perf record -g, kept as DIR/perf.COUNT.data (for perf report)
if [ -n "${FG_BENCH_TENANT_RECORD:-}" ] && command -v perf >/dev/null; then
	mkdir -p "$FG_BENCH_TENANT_RECORD"
	for n in "${COUNTS[@]}"; do
		perf record -g -o "$FG_BENCH_TENANT_RECORD/perf.$n.data" -p "${PID[$n]}" 2>/dev/null &
		rec=$!
		sleep 0.3
		run "$n" "$SECS" >/dev/null
		kill -INT "$rec"; wait "$rec" 2>/dev/null
	done
	echo "   perf record of each agent over one more run: $FG_BENCH_TENANT_RECORD/perf.COUNT.data"
fi
for n in "${COUNTS[@]}"; do
	kill -0 "${PID[$n]}" 2>/dev/null || { echo "tenants bench: the $n-tenant agent exited"; tail -n 5 "$TMP/agent.$n.log"; exit 1; }
done
[ "$bad_rounds" -eq 0 ] || { echo "tenants bench: $bad_rounds runs had non-2xx answers (figures above not comparable)"; exit 1; }
