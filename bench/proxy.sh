#!/usr/bin/env bash
# proxy.sh BUILD_DIR — the admission proxy's benchmarks (`make bench` runs it
# through bench/run.sh), each side by side in one run:
#  1. requests/s (wrk, closed loop) and p50/p99 latency at a fixed offered
#     rate (fg-load, open loop: no coordinated omission) for the same chat
#     request sent straight to fairgate-sim, through Debian's nginx as a plain
#     keep-alive reverse proxy (1 worker, our own config and prefix), and
#     through fairgated (--no-bpf, one thread); rounds interleaved (the order
#     rotates each round), medians, and the median of each round's
#     fairgated/nginx req/s ratio. Both proxies are pinned to CPU 0; the
#     simulator and the load generators float. (Giving the simulator a CPU of
#     its own made it the bottleneck at ~100% of that CPU, proxied faster
#     than direct: req/s then measured the engine, not the proxy.) On 2
#     CPUs the simulator and wrk cost as much per request as the proxy, so
#     req/s moves only a fraction of any change in the proxy's own cost;
#     that cost is printed too: the proxy process's CPU time (user + sys,
#     from /proc) per request during the wrk runs, and the CPU time nobody
#     used (idle, /proc/stat) per request: the bubbles a proxy leaves;
#  2. the admission decision's cost per request for 1 KiB, 64 KiB and 1 MiB
#     bodies (fg-decision-bench, in-process);
#  3. how many 429s per second the agent answers for an over-quota tenant
#     (the number bench/gate.sh's SYN-drop rate is compared with);
#  4. CPU per request by body size (1 KiB, 16 KiB, 128 KiB, 1 MiB chat
#     bodies): a second fairgated and the nginx proxy, both on CPU 0, in
#     front of a do-nothing upstream (a separate nginx answering a fixed
#     completion, off CPU 0), the proxy process's CPU time per request over
#     wrk runs, rounds interleaved; medians and ranges of the per-round
#     fairgated/nginx ratio. FG_BENCH_BODY_AGENT names another fairgated
#     binary to run as a third path (before/after a change, same run);
#     FG_BENCH_BODY_ROUNDS (3) and FG_BENCH_BODY_SECONDS (FG_BENCH_SECONDS).
#     FG_BENCH_BODY_ONLY=1 runs this part alone (parts 1-3 skipped: a short
#     mode while developing); FG_BENCH_BODY_PERF=SIZE records fairgated with
#     `perf record -g` during its first run at that body size, into
#     FG_BENCH_BODY_PERF_OUT (default ./perf.body.data).
# Everything runs in namespaces it creates (fgt-pxb-*) and is removed on exit.
set -u
BUILD=$(cd "${1:-build}" && pwd)
[ "$(id -u)" -eq 0 ] || { echo "proxy bench: needs root (namespaces)"; exit 0; }
command -v wrk >/dev/null && command -v nginx >/dev/null ||
	{ echo "proxy bench: needs wrk and nginx (scripts/deps.sh --bench)"; exit 1; }
ROUNDS=${FG_BENCH_ROUNDS:-9} SECS=${FG_BENCH_SECONDS:-3} RATE=${FG_BENCH_RATE:-1000}
ON_PROXY="taskset -c 0" # both proxies, the same way (see the top)
source "$(dirname "$0")/netpair.inc"
netpair pxb 10.251.0
head -c 32 /dev/urandom >"$TMP/salt.key"
chmod 600 "$TMP/salt.key"

KEY=sk-bench KEY_FLOOD=sk-flood
cat >"$TMP/policy.yaml" <<EOF
tiers:
  standard: {burst_s: 60, default_max_tokens: 16}
tenants:
  - name: bench
    tier: standard
    units_per_s: 1000000000
    keys: ["sha256:$(printf %s $KEY | sha256sum | cut -d' ' -f1)"]
  - name: flood
    tier: standard
    units_per_s: 100
    keys: ["sha256:$(printf %s $KEY_FLOOD | sha256sum | cut -d' ' -f1)"]
agent:
  listen: 0.0.0.0:8000
  engine: 127.0.0.1:8001
  metrics_listen: 127.0.0.1:9464
  salt_secret_file: $TMP/salt.key
EOF
mkdir -p "$TMP/nginx/logs"
{ nginx_conf_head "$TMP/nginx" 4096; cat <<EOF; } >"$TMP/nginx/nginx.conf"
	client_body_buffer_size 1m;
	keepalive_requests 1000000;
	upstream engine {
		server 127.0.0.1:8001;
		keepalive 128;
		keepalive_requests 1000000; # default 1000: a reconnect fairgated never makes
	}
	server {
		listen 8080;
		location / {
			proxy_pass http://engine;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_buffering off;
		}
	}
}
EOF

start() { # LOG CMD...
	local log=$1; shift
	"$@" >"$log" 2>&1 &
	PIDS+=($!)
}
wait_port() {
	for _ in $(seq 100); do
		ip netns exec "$SNS" bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null && return 0
		sleep 0.1
	done
	echo "proxy bench: nothing listens on :$1"; tail -5 "$TMP"/*.log; exit 1
}
start "$TMP/sim.log" ip netns exec "$SNS" "$BUILD/fairgate-sim" --policy "$TMP/policy.yaml" \
	--listen 0.0.0.0:8001 --speedup 0
start "$TMP/agent.log" ip netns exec "$SNS" $ON_PROXY "$BUILD/fairgated" --policy "$TMP/policy.yaml" \
	--ctl "$TMP/ctl.sock" --no-bpf
AGENT_PID=${PIDS[-1]}
start "$TMP/nginx.log" ip netns exec "$SNS" $ON_PROXY nginx -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf"
NGINX_MASTER=${PIDS[-1]}
wait_port 8001; wait_port 8000; wait_port 8080
for _ in $(seq 50); do
	NGINX_WORKER=$(pgrep -P "$NGINX_MASTER" | head -1)
	[ -n "$NGINX_WORKER" ] && break
	sleep 0.1
done
# the process whose CPU time is the proxy's (none for the direct path)
declare -A PROXY_PID=([direct]="" [nginx]=$NGINX_WORKER [fairgated]=$AGENT_PID)

BODY='{"model":"llama-3.3-70b","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"What is the capital of France? Answer in one short sentence."}],"max_tokens":16}'
cat >"$TMP/post.lua" <<EOF
wrk.method = "POST"
wrk.body = '$BODY'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("FG_KEY")
EOF
declare -A PORT=([direct]=8001 [nginx]=8080 [fairgated]=8000)
PATHS=(direct nginx fairgated)

# wrk: "Requests/sec: N"; fg-load: latency of 2xx at a fixed offered rate
wrk_run() { # PORT KEY SECS -> wrk's report
	FG_KEY=$2 ip netns exec "$CNS" wrk -t1 -c32 -d"${3}s" -s "$TMP/post.lua" \
		"http://$SRV:$1/v1/chat/completions"
}
cpu_ticks() { # PID -> utime + stime, or 0
	[ -n "$1" ] && awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0
}
idle_ticks() { awk '/^cpu / { print $5 + $6 }' /proc/stat; } # idle + iowait, all CPUs
wrk_rps() { # PATH -> "req/s cpu-us-per-request idle-us-per-request"
	# cpu: the proxy process (0 for direct); idle: CPU time nobody used
	local pid=${PROXY_PID[$1]} t0 t1 i0 i1 out
	t0=$(cpu_ticks "$pid"); i0=$(idle_ticks)
	out=$(wrk_run "${PORT[$1]}" $KEY "$SECS")
	t1=$(cpu_ticks "$pid"); i1=$(idle_ticks)
	echo "$out" >>"$TMP/wrk.out"
	echo "$out" | awk -v d=$((t1 - t0)) -v idle=$((i1 - i0)) -v hz="$(getconf CLK_TCK)" '
		/requests in/ { n = $1 } /^Requests\/sec:/ { r = $2 }
		END { printf "%s %.1f %.1f\n", r, n ? d / hz * 1e6 / n : 0, n ? idle / hz * 1e6 / n : 0 }'
}
open_loop() { # PORT -> "p50 p99 ok sent"
	ip netns exec "$CNS" "$BUILD/fg-load" --target "$SRV:$1" --duration "$SECS" --connections 32 \
		--model llama-3.3-70b --tenant "b:$KEY:$RATE:60:16" 2>/dev/null |
		jq -r '.tenants[0] | "\(.latency_ms.p50) \(.latency_ms.p99) \(.status["200"] // 0) \(.sent)"'
}
median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

if [ -z "${FG_BENCH_BODY_ONLY:-}" ]; then
echo "== proxy: the same chat request, straight to the simulator / through nginx / through fairgated =="
echo "   ($ROUNDS interleaved rounds of ${SECS}s, order rotating; wrk -c32 closed loop for req/s;" \
	"fg-load open loop at $RATE req/s for latency; proxies on CPU 0)"
for p in "${PATHS[@]}"; do wrk_run "${PORT[$p]}" $KEY 1 >/dev/null; done # warm: pools, caches
for r in $(seq "$ROUNDS"); do
	for i in "${!PATHS[@]}"; do
		p=${PATHS[$(((i + r) % ${#PATHS[@]}))]}
		read -r rps cpu idle <<<"$(wrk_rps "$p")"
		echo "$rps" >>"$TMP/rps.$p"; echo "$cpu" >>"$TMP/cpu.$p"; echo "$idle" >>"$TMP/idle.$p"
		echo "$r $rps" >>"$TMP/round.$p"
		read -r p50 p99 ok sent <<<"$(open_loop "${PORT[$p]}")"
		echo "$p50" >>"$TMP/p50.$p"; echo "$p99" >>"$TMP/p99.$p"
		echo "$r $p50 $p99" >>"$TMP/lat.$p"
		[ "$ok" = "$sent" ] || echo "   warning: $p round $r: $ok of $sent requests answered 200"
	done
done
printf '%-10s %10s %10s %10s %11s %11s %12s %11s\n' path "req/s" "p50 ms" "p99 ms" "added p50" "added p99" \
	"proxy us/req" "idle us/req"
for p in "${PATHS[@]}"; do
	eval "R_$p=$(median <"$TMP/rps.$p") P50_$p=$(median <"$TMP/p50.$p") P99_$p=$(median <"$TMP/p99.$p")"
	eval "C_$p=$(median <"$TMP/cpu.$p") I_$p=$(median <"$TMP/idle.$p")"
done
for p in "${PATHS[@]}"; do
	eval "r=\$R_$p a=\$P50_$p b=\$P99_$p c=\$C_$p i=\$I_$p"
	awk -v p="$p" -v r="$r" -v a="$a" -v b="$b" -v c="$c" -v i="$i" -v da="$P50_direct" -v db="$P99_direct" \
		'BEGIN { printf "%-10s %10.0f %10.3f %10.3f %11.3f %11.3f %12s %11.1f\n", p, r, a, b, a - da, b - db,
			 p == "direct" ? "-" : sprintf("%.1f", c), i }'
done
# each round's ratio: both sides of it saw the same moment of a shared machine
RATIOS=$(awk 'NR == FNR { f[$1] = $2; next } $1 in f && $2 > 0 { printf "%.3f\n", f[$1] / $2 }' \
	"$TMP/round.fairgated" "$TMP/round.nginx" | sort -g)
# each round's latency difference, fairgated minus nginx (the direct path
# cancels out): negative = fairgated added less
lat_diff() { # COLUMN(2 = p50, 3 = p99) -> sorted per-round differences in ms
	awk -v c="$1" 'NR == FNR { f[$1] = $c; next } $1 in f { printf "%.3f\n", f[$1] - $c }' \
		"$TMP/lat.fairgated" "$TMP/lat.nginx" | sort -g
}
D50=$(lat_diff 2) D99=$(lat_diff 3)
awk -v rf="$R_fairgated" -v rn="$R_nginx" -v af="$P50_fairgated" -v an="$P50_nginx" -v bf="$P99_fairgated" \
	-v bn="$P99_nginx" -v d50="$P50_direct" -v d99="$P99_direct" -v cf="$C_fairgated" -v cn="$C_nginx" \
	-v m50="$(median <<<"$D50")" -v lo50="$(head -1 <<<"$D50")" -v hi50="$(tail -1 <<<"$D50")" \
	-v m99="$(median <<<"$D99")" -v lo99="$(head -1 <<<"$D99")" -v hi99="$(tail -1 <<<"$D99")" \
	-v rm="$(median <<<"$RATIOS")" -v lo="$(head -1 <<<"$RATIOS")" -v hi="$(tail -1 <<<"$RATIOS")" 'BEGIN {
	printf "fairgated vs nginx: %.2fx the req/s (median of per-round ratios %.2fx, range %.2f-%.2f);\n",
		rf / rn, rm, lo, hi
	printf "  added latency p50 %.3f vs %.3f ms, p99 %.3f vs %.3f ms; proxy CPU %.1f vs %.1f us/request\n",
		af - d50, an - d50, bf - d99, bn - d99, cf, cn
	printf "  per round, fairgated minus nginx: p50 %+.3f ms (median; range %+.3f to %+.3f), p99 %+.3f ms (%+.3f to %+.3f)\n",
		m50, lo50, hi50, m99, lo99, hi99 }'
if grep -q "Non-2xx" "$TMP/wrk.out"; then echo "   warning: some wrk responses were not 2xx"; fi

echo
echo "== admission decision cost per request (in-process, median of 7 runs) =="
"$BUILD/fg-decision-bench" --runs 7

echo
echo "== 429s per second fairgated answers for an over-quota tenant (wrk -c32, ${SECS}s) =="
FG_KEY=$KEY_FLOOD ip netns exec "$CNS" wrk -t1 -c32 -d"${SECS}s" -s "$TMP/post.lua" \
	"http://$SRV:8000/v1/chat/completions" >"$TMP/flood.out"
rps429=$(awk '/^Requests\/sec:/ { print $2 }' "$TMP/flood.out")
non2xx=$(awk '/Non-2xx/ { print $NF }' "$TMP/flood.out")
total=$(awk '/requests in/ { print $1 }' "$TMP/flood.out")
printf 'agent 429s: %.0f responses/s (%s of %s were non-2xx)\n' "$rps429" "${non2xx:-0}" "$total"
echo "agent_429_per_s=$rps429" >"${FG_BENCH_RESULTS:-/dev/null}"
fi # FG_BENCH_BODY_ONLY

echo
echo "== CPU per request by body size: fairgated vs nginx, in front of a do-nothing upstream =="
# The upstream: an nginx of its own (not the proxy's worker, whose CPU is
# measured), off CPU 0, answering one fixed completion to any body.
KEY_BODY=sk-bodies
mkdir -p "$TMP/sink/logs" "$TMP/nginxb/logs"
nginx_sink_conf "$TMP/sink" 8002 >"$TMP/sink/nginx.conf"
# the nginx proxy for this part: the configuration above, its upstream the sink
sed -e "s|127.0.0.1:8001|127.0.0.1:8002|; s|listen 8080|listen 8082|; s|$TMP/nginx/|$TMP/nginxb/|g" \
	"$TMP/nginx/nginx.conf" >"$TMP/nginxb/nginx.conf"
# a 1 MiB prompt is ~260k tokens: a tier and a pool that hold it. The
# engine window opened all the way (engine_queue_steps 1000): it counts a
# non-streamed request as not started until the engine's metrics say so,
# and the do-nothing upstream has none, so at its default (2 steps, ~800
# prompt tokens) every body past ~3 KiB went to the upstream one at a time
# (12.5k against nginx's 42k req/s at 16 KiB, the agent asleep between
# requests, 2.6-3x nginx's CPU per request in wakeups, not in the body):
# this part measures the proxy's cost per body byte, not that window
cat >"$TMP/policy-body.yaml" <<EOF
replica: {kv_pool_tokens: 8000000}
tiers:
  wide: {burst_s: 60, default_max_tokens: 16, max_context: 4000000, kv_cap_tokens: 8000000}
tenants:
  - name: bodies
    tier: wide
    units_per_s: 1000000000000
    keys: ["sha256:$(printf %s $KEY_BODY | sha256sum | cut -d' ' -f1)"]
agent:
  listen: 0.0.0.0:8010
  engine: 127.0.0.1:8002
  metrics_listen: 127.0.0.1:9465
  salt_secret_file: $TMP/salt.key
  engine_queue_steps: 1000
EOF
start "$TMP/sink.log" ip netns exec "$SNS" taskset -c 1 nginx -p "$TMP/sink" -c "$TMP/sink/nginx.conf"
start "$TMP/nginxb.log" ip netns exec "$SNS" $ON_PROXY nginx -p "$TMP/nginxb" -c "$TMP/nginxb/nginx.conf"
NGINXB_MASTER=${PIDS[-1]}
start "$TMP/agentb.log" ip netns exec "$SNS" $ON_PROXY "$BUILD/fairgated" --policy "$TMP/policy-body.yaml" \
	--ctl "$TMP/ctlb.sock" --no-bpf
BPATHS=(nginx fairgated)
declare -A BPORT=([nginx]=8082 [fairgated]=8010) BPID=([fairgated]=${PIDS[-1]})
if [ -n "${FG_BENCH_BODY_AGENT:-}" ]; then
	sed -e "s|listen: 0.0.0.0:8010|listen: 0.0.0.0:8011|; s|9465|9466|" "$TMP/policy-body.yaml" \
		>"$TMP/policy-body2.yaml"
	start "$TMP/agentc.log" ip netns exec "$SNS" $ON_PROXY "$FG_BENCH_BODY_AGENT" \
		--policy "$TMP/policy-body2.yaml" --ctl "$TMP/ctlc.sock" --no-bpf
	BPATHS+=(other)
	BPORT[other]=8011
	BPID[other]=${PIDS[-1]}
	wait_port 8011
fi
wait_port 8002; wait_port 8082; wait_port 8010
for _ in $(seq 50); do
	BPID[nginx]=$(pgrep -P "$NGINXB_MASTER" | head -1)
	[ -n "${BPID[nginx]}" ] && break
	sleep 0.1
done
BROUNDS=${FG_BENCH_BODY_ROUNDS:-3} BSECS=${FG_BENCH_BODY_SECONDS:-$SECS}
BSIZES=(1024 16384 131072 1048576)
for size in "${BSIZES[@]}"; do
	chat_body_files "$TMP/body.$size" "$size" "$KEY_BODY"
done
# times the process went to sleep (voluntary context switches, all threads):
# a proxy that finds no work when it looks sleeps and is woken per request
sleeps() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/^voluntary_ctxt_switches:/ { s += $2 } END { print s + 0 }'; }
body_run() { # PATH SIZE SECS -> "cpu-us-per-request requests non2xx sleeps-per-request"
	local pid=${BPID[$1]} t0 t1 s0 s1 out perf=
	if [ "$1" = fairgated ] && [ "${FG_BENCH_BODY_PERF:-}" = "$2" ] && [ ! -e "$TMP/perf.done" ]; then
		touch "$TMP/perf.done"
		perf record -q -g -p "$pid" -o "${FG_BENCH_BODY_PERF_OUT:-$PWD/perf.body.data}" \
			-- sleep "$3" >/dev/null 2>&1 &
		perf=$!
	fi
	t0=$(cpu_ticks "$pid") s0=$(sleeps "$pid")
	out=$(ip netns exec "$CNS" wrk -t1 -c8 -d"${3}s" -s "$TMP/body.$2.lua" \
		"http://$SRV:${BPORT[$1]}/v1/chat/completions")
	t1=$(cpu_ticks "$pid") s1=$(sleeps "$pid")
	[ -n "$perf" ] && wait "$perf"
	echo "$out" | awk -v d=$((t1 - t0)) -v s=$((s1 - s0)) -v hz="$(getconf CLK_TCK)" '
		/requests in/ { n = $1 } /Non-2xx/ { bad = $NF }
		END { printf "%.1f %d %d %.2f\n", n ? d / hz * 1e6 / n : 0, n, bad, n ? s / n : 0 }'
}
for p in "${BPATHS[@]}"; do body_run "$p" 1024 1 >/dev/null; done # warm
for r in $(seq "$BROUNDS"); do
	for size in "${BSIZES[@]}"; do
		for i in "${!BPATHS[@]}"; do
			p=${BPATHS[$(((i + r) % ${#BPATHS[@]}))]}
			read -r cpu n bad slp <<<"$(body_run "$p" "$size" "$BSECS")"
			echo "$r $cpu" >>"$TMP/bcpu.$p.$size"
			echo "$slp" >>"$TMP/bslp.$p.$size"
			echo "$n $BSECS" >>"$TMP/breq.$p.$size"
			[ "$bad" = 0 ] || echo "   warning: $p $size B round $r: $bad of $n answered non-2xx"
		done
	done
done
body_ratio() { # PATH SIZE -> "median (lo-hi)" of the per-round PATH/nginx ratios
	awk 'NR == FNR { f[$1] = $2; next } $1 in f && $2 > 0 { printf "%.3f\n", f[$1] / $2 }' \
		"$TMP/bcpu.$1.$2" "$TMP/bcpu.nginx.$2" | sort -g |
		awk '{ a[NR] = $1 } END { m = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
			printf "%.2fx (%.2f-%.2f)", m, a[1], a[NR] }'
}
printf '%-8s %13s %17s %20s' body "nginx us/req" "fairgated us/req" "fairgated/nginx"
[ -n "${FG_BENCH_BODY_AGENT:-}" ] && printf ' %13s %20s' "other us/req" "other/nginx"
echo
for size in "${BSIZES[@]}"; do
	line=$(printf '%-8s %13.1f %17.1f %20s' "$((size / 1024))KiB" \
		"$(cut -d' ' -f2 "$TMP/bcpu.nginx.$size" | median)" \
		"$(cut -d' ' -f2 "$TMP/bcpu.fairgated.$size" | median)" "$(body_ratio fairgated "$size")")
	[ -n "${FG_BENCH_BODY_AGENT:-}" ] && line+=$(printf ' %13.1f %20s' \
		"$(cut -d' ' -f2 "$TMP/bcpu.other.$size" | median)" "$(body_ratio other "$size")")
	echo "$line"
done
echo "   (proxy CPU time per request: medians over $BROUNDS rounds of ${BSECS}s, wrk -c8;" \
	"ratios: median and range of the per-round ratios)"
# why a figure is what it is: how often each proxy slept per request (one
# that finds no more work when it looks is woken per request, and a wakeup
# costs a context switch), and the rate it went at
# size_table HEAD_FN CELL_FN — a row per body size, HEAD_FN PATH's
# column heads and CELL_FN PATH SIZE's cells for each path
size_table() {
	printf '%-8s' body
	for p in "${BPATHS[@]}"; do "$1" "$p"; done
	echo
	for size in "${BSIZES[@]}"; do
		printf '%-8s' "$((size / 1024))KiB"
		for p in "${BPATHS[@]}"; do "$2" "$p" "$size"; done
		echo
	done
}
sleeps_head() { printf ' %17s %14s' "$1 sleeps/req" "$1 req/s"; }
sleeps_cell() {
	printf ' %17.2f %14.0f' "$(median <"$TMP/bslp.$1.$2")" \
		"$(awk '{ print $1 / $2 }' "$TMP/breq.$1.$2" | median)"
}
size_table sleeps_head sleeps_cell
echo "   (medians over the same runs: voluntary context switches of the proxy process per request; wrk's req/s)"
# and what each does per request in the kernel's view: system calls, and
# of them the reads of the client's bytes, counted by perf over one more
# 1 s run per path and size after the measured ones (the counting itself
# costs, so those runs are not in the CPU figures above)
body_syscalls() { # PATH SIZE -> "syscalls-per-request reads-per-request"
	local pid=${BPID[$1]} st=$TMP/stat.$1.$2 out
	perf stat -x, -o "$st" -e raw_syscalls:sys_enter,syscalls:sys_enter_recvfrom,syscalls:sys_enter_read,syscalls:sys_enter_readv \
		-p "$pid" -- sleep 1 >/dev/null 2>&1 &
	local perf=$!
	out=$(ip netns exec "$CNS" wrk -t1 -c8 -d1s -s "$TMP/body.$2.lua" \
		"http://$SRV:${BPORT[$1]}/v1/chat/completions")
	wait "$perf"
	echo "$out" | awk -F, -v st="$st" '
		/requests in/ { split($0, w, " "); n = w[1] }
		END { while ((getline l < st) > 0) { split(l, f, ","); if (f[3] == "raw_syscalls:sys_enter") all = f[1]; else if (f[3] ~ /sys_enter_(recvfrom|read|readv)$/) rd += f[1] }
		      if (n && all) printf "%.1f %.1f\n", all / n, rd / n; else print "n/a n/a" }'
}
syscalls_head() { printf ' %19s %16s' "$1 syscalls/req" "$1 reads/req"; }
syscalls_cell() { printf ' %19s %16s' $(body_syscalls "$1" "$2"); }
if command -v perf >/dev/null && perf stat -e raw_syscalls:sys_enter true >/dev/null 2>&1; then
	size_table syscalls_head syscalls_cell
	echo "   (perf stat over one 1 s wrk run each: all system calls, and recv/read/readv, per request)"
else
	echo "   (no perf with syscall tracepoints here: system calls per request not counted)"
fi
