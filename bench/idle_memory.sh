#!/usr/bin/env bash
# idle_memory.sh BUILD_DIR — what a client connection costs in memory, and
# what idle connections cost in CPU, fairgated against Debian's nginx as a
# plain keep-alive reverse proxy, side by side in one run (`make bench` runs
# it through bench/run.sh).
#
# For each case, both proxies start fresh (so freed memory kept by an
# allocator cannot hide a cost), one client process opens N connections to
# one of them, and the proxy's RSS growth (fairgated's process; nginx's one
# worker) divided by N is its cost per connection:
#   idle     N keep-alive connections, nothing sent yet
#   small    N connections, each after one small chat request (answered)
#   64k      N connections, each after one request with a 64 KiB body
#            (the bulk in the `user` field: the engine's work stays small)
#   stream   S SSE streams open and flowing (fg-load, closed loop, reading;
#            2,500 tokens each, so all S fit the KV pool and run at once)
# N defaults to 10,000 (FG_BENCH_CONNS), S to 200 (FG_BENCH_STREAMS: one
# replica runs ~128-256 sequences at once, and fairgated holds a stream's
# request back until the engine has room for it); the ratio is
# fairgated/nginx. ROUNDS (FG_BENCH_ROUNDS, default 3) repeat everything;
# medians and ranges are printed at the end. User-space RSS only: the
# kernel's socket buffers are the same for both and not counted. A case
# whose proxy holds fewer than N connections (counted on its side) or
# answers fewer than N requests stops the bench: its figure would be per
# connection it did not hold. fairgated's connection caps and body budget
# are raised to N for that (its defaults would refuse part of one client's
# 10,000 connections and 64 KiB bodies).
# In the idle case each proxy's CPU time is also read over a fixed window
# while it holds the N connections and nothing is sent (IDLE_S seconds,
# FG_BENCH_IDLE_S, default 10; all its threads, from schedstat), printed as
# % of one core: the cost of having connections, timers included.
# FG_BENCH_CASES narrows the cases (e.g. "idle").
# FG_BENCH_OTHER_AGENT names another fairgated binary (a build before a
# change, say) measured in the idle case beside the two, the same way.
# Everything runs in namespaces it creates (fgt-imb-*) and is removed on exit.
set -u
BUILD=$(cd "${1:-build}" && pwd)
[ "$(id -u)" -eq 0 ] || { echo "idle_memory bench: needs root (namespaces)"; exit 0; }
command -v nginx >/dev/null || { echo "idle_memory bench: needs nginx (scripts/deps.sh --bench)"; exit 1; }
N=${FG_BENCH_CONNS:-10000} S=${FG_BENCH_STREAMS:-200} ROUNDS=${FG_BENCH_ROUNDS:-3}
IDLE_S=${FG_BENCH_IDLE_S:-10} OTHER=${FG_BENCH_OTHER_AGENT:-}
[ -z "$OTHER" ] || [ -x "$OTHER" ] || { echo "idle_memory bench: FG_BENCH_OTHER_AGENT=$OTHER is not an executable"; exit 1; }
source "$(dirname "$0")/netpair.inc"
netpair imb 10.254.0
# room for 10,000 connections and their SYNs arriving at once (and the fds:
# each side needs N plus a few, and fairgated's connection caps are set to
# N + 100 below, since by default they come from the fd limit)
[ "$(ulimit -Hn)" -ge $((N + 200)) ] ||
	{ echo "idle_memory bench: $N connections need a nofile hard limit above $((N + 200)), have $(ulimit -Hn)"; exit 1; }
for ns in "$SNS" "$CNS"; do
	ip netns exec "$ns" sysctl -qw net.core.somaxconn=65535 net.ipv4.tcp_max_syn_backlog=65535 \
		net.ipv4.ip_local_port_range="10000 65000"
done
head -c 32 /dev/urandom >"$TMP/salt.key"
chmod 600 "$TMP/salt.key"

KEY=sk-bench
cat >"$TMP/policy.yaml" <<POLICY
tiers:
  standard: {burst_s: 60, default_max_tokens: 16, kv_cap_tokens: 600000, max_queue_s: 120}
tenants:
  - name: bench
    tier: standard
    units_per_s: 1000000000
    keys: ["sha256:$(printf %s $KEY | sha256sum | cut -d' ' -f1)"]
agent:
  listen: 0.0.0.0:8000
  engine: 127.0.0.1:8001
  metrics_listen: 127.0.0.1:9464
  salt_secret_file: $TMP/salt.key
  timeouts: {header_s: 300, body_s: 300, idle_s: 300}
  # every connection the client opens (one address), not the defaults'
  # half of the fds and half of that per source, which would cut the run;
  # all N requests of the one tenant at once (past 256 in flight: 429); and
  # every 64 KiB body at once (10,000 of them are 640 MiB, past the default
  # budget of 256 MiB, which would answer some 503 instead)
  limits: {max_connections: $((N + 2000)), max_connections_per_source: $((N + 2000)),
           max_inflight_per_tenant: $((N + 2000)),
           max_buffered_bytes: $(( (N + 100) * 128 * 1024 > 1 << 30 ? (N + 100) * 128 * 1024 : 1 << 30 ))}
POLICY
mkdir -p "$TMP/nginx/logs"
{ nginx_conf_head "$TMP/nginx" 19000 "worker_rlimit_nofile 20000;"; cat <<NGINX; } >"$TMP/nginx/nginx.conf"
	client_body_buffer_size 1m;
	client_header_timeout 300s;
	keepalive_timeout 300s;
	keepalive_requests 1000000;
	upstream engine {
		server 127.0.0.1:8001;
		keepalive 128;
		keepalive_requests 1000000;
	}
	server {
		listen 8080 backlog=65535;
		location / {
			proxy_pass http://engine;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_buffering off;
			proxy_read_timeout 300s;
		}
	}
}
NGINX

start() { # LOG CMD...
	local log=$1; shift
	"$@" >"$log" 2>&1 &
	PIDS+=($!)
	LAST=$!
}
stop() { kill -TERM "$1" 2>/dev/null; wait "$1" 2>/dev/null; }
wait_port() {
	for _ in $(seq 100); do
		ip netns exec "$SNS" bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null && return 0
		sleep 0.1
	done
	echo "idle_memory bench: nothing listens on :$1"; tail -n 5 "$TMP"/*.log; exit 1
}
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
# nanoseconds on a CPU so far, all the process's threads
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%.0f", s }'; }
# two engines: as fast as possible for the request cases (10,000 answers in
# seconds), real time for the streams (so they stay open while measured)
start "$TMP/sim.log" ip netns exec "$SNS" "$BUILD/fairgate-sim" \
	--policy "$TMP/policy.yaml" --listen 127.0.0.1:8001 --speedup 0 --max-num-seqs 512
start "$TMP/sim2.log" ip netns exec "$SNS" "$BUILD/fairgate-sim" \
	--policy "$TMP/policy.yaml" --listen 127.0.0.1:8002 --speedup 1 --max-num-seqs 512
wait_port 8001; wait_port 8002
sed 's/127.0.0.1:8001/127.0.0.1:8002/' "$TMP/policy.yaml" >"$TMP/policy.stream.yaml"
sed 's/127.0.0.1:8001/127.0.0.1:8002/' "$TMP/nginx/nginx.conf" >"$TMP/nginx/nginx.stream.conf"

# proxy_start NAME [.stream] — a fresh proxy (to the real-time engine with
# .stream); NAME fairgated, other (FG_BENCH_OTHER_AGENT) or nginx; sets
# PROXY_PID (whose RSS is measured), PROXY_STOP (what to stop) and PORT
proxy_start() {
	if [ "$1" = fairgated ] || [ "$1" = other ]; then
		start "$TMP/agent.log" ip netns exec "$SNS" "$([ "$1" = other ] && echo "$OTHER" || echo "$BUILD/fairgated")" \
			--policy "$TMP/policy${2:-}.yaml" --ctl "$TMP/ctl.sock" --no-bpf
		PROXY_PID=$LAST PROXY_STOP=$LAST PORT=8000
	else
		start "$TMP/nginx.log" ip netns exec "$SNS" nginx -p "$TMP/nginx" -c "$TMP/nginx/nginx${2:-}.conf"
		PROXY_STOP=$LAST PORT=8080
		for _ in $(seq 50); do
			PROXY_PID=$(pgrep -P "$PROXY_STOP" | head -1)
			[ -n "$PROXY_PID" ] && break
			sleep 0.1
		done
	fi
	wait_port "$PORT"
}

small='{"messages":[{"role":"user","content":"hi"}],"max_tokens":1}'
pad=$(head -c 65450 /dev/zero | tr '\0' x)
printf '%s' "$small" >"$TMP/small.json"
printf '{"messages":[{"role":"user","content":"hi"}],"max_tokens":1,"user":"%s"}' "$pad" >"$TMP/64k.json"

# hold PORT [BODY_FILE] — one bash in the client namespace opens N
# connections, sends the request on each (none without a file), reads each
# answer's status line, then holds them all; "held K answered A" in
# $TMP/hold.out when done.
hold() {
	: >"$TMP/hold.out"
	start "$TMP/hold.log" ip netns exec "$CNS" bash -c '
		ulimit -n "$(ulimit -Hn)"
		n=$1 port=$2 file=$3 key=$4 out=$5 fds=() answered=0
		[ -n "$file" ] && body=$(cat "$file")
		for ((i = 0; i < n; i++)); do
			exec {fd}<>"/dev/tcp/10.254.0.1/$port" || break
			fds+=("$fd")
			[ -n "$file" ] && printf "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" \
				"$key" "${#body}" "$body" >&$fd
		done
		if [ -n "$file" ]; then
			# no read -t: bash times a read with select(), which aborts
			# on an fd past FD_SETSIZE (1024); hold gives up after 300 s
			for fd in "${fds[@]}"; do
				read -r -u "$fd" line && [[ $line == "HTTP/1.1 200"* ]] && answered=$((answered + 1))
			done
		fi
		echo "held ${#fds[@]} answered $answered" >"$out"
		while :; do sleep 1; done' _ "$N" "$1" "${2:-}" "$KEY" "$TMP/hold.out"
	HOLD=$LAST
	for _ in $(seq 3000); do [ -s "$TMP/hold.out" ] && return 0; sleep 0.1; done
	echo "the client never finished" >"$TMP/hold.out"
}

# measure CASE PROXY — one proxy, one case: KiB per connection in
# $TMP/kib, in the idle case the % of a core it spent over IDLE_S seconds
# holding them in $TMP/cpu, what was held and the RSS before and after in
# $TMP/why (not a
# command substitution: the processes it starts must stay in PIDS, for the
# cleanup of an interrupted run)
measure() {
	local c=$1 name=$2 before after per=$N
	proxy_start "$name" "$([ "$c" = stream ] && echo .stream)"
	sleep 0.5
	before=$(rss_kb "$PROXY_PID")
	case $c in
	idle) hold "$PORT" ;;
	small | 64k) hold "$PORT" "$TMP/$c.json" ;;
	stream)
		per=$S
		start "$TMP/load.json" ip netns exec "$CNS" "$BUILD/fg-load" --target "$SRV:$PORT" \
			--tenant "bench:$KEY:1:64:2500:stream" --closed --connections "$S" --duration 8 \
			--drain 0 --timeout 30
		HOLD=$LAST
		sleep 5
		echo "$S streams, $(ip netns exec "$SNS" curl -s http://127.0.0.1:8002/metrics |
			awk '$1 ~ /^vllm:num_requests_running/ { s += $2 } END { print s + 0 }') running in the engine" >"$TMP/hold.out" ;;
	esac
	# 2 s: past fairgated's next 1 s tick, which gives back the heap a
	# burst freed once nothing is at the engine (the steady idle state)
	sleep 2
	after=$(rss_kb "$PROXY_PID")
	if [ "$c" = idle ]; then
		local t0 t1 c0 c1
		t0=$(date +%s%N) c0=$(cpu_ns "$PROXY_PID")
		sleep "$IDLE_S"
		t1=$(date +%s%N) c1=$(cpu_ns "$PROXY_PID")
		awk -v c="$((c1 - c0))" -v t="$((t1 - t0))" 'BEGIN { printf "%.3f", 100 * c / t }' >"$TMP/cpu"
	fi
	# what the proxy holds, counted on its side: a cap or a refusal that
	# closed some would make the per-connection figure a lie
	est=$(ip netns exec "$SNS" ss -Htn state established sport = :"$PORT" | wc -l)
	stop "$HOLD"
	stop "$PROXY_STOP"
	awk -v a="$after" -v b="$before" -v n="$per" 'BEGIN { printf "%.2f", (a - b) / n }' >"$TMP/kib"
	echo " $(cat "$TMP/hold.out"), $est established at the proxy, RSS $before -> $after kB" >"$TMP/why"
	local answered
	answered=$(sed -n 's/.* answered \([0-9]*\).*/\1/p' "$TMP/hold.out")
	if [ "$est" -lt "$per" ] || { { [ "$c" = small ] || [ "$c" = 64k ]; } && [ "${answered:-0}" -lt "$per" ]; }; then
		echo "idle_memory bench: $name held $est of $per connections (or answered fewer) in case $c:$(cat "$TMP/why")"
		tail -n 3 "$TMP/agent.log" "$TMP/nginx/logs/error.log" 2>/dev/null
		exit 1
	fi
}

CASES=(${FG_BENCH_CASES:-idle small 64k stream})
declare -A R
for ((round = 1; round <= ROUNDS; round++)); do
	echo "== round $round: $N connections, $S streams =="
	for c in "${CASES[@]}"; do
		measure "$c" fairgated; f=$(cat "$TMP/kib"); cp "$TMP/why" "$TMP/f.why"
		[ "$c" = idle ] && R[cpu,f]+="$(cat "$TMP/cpu") "
		measure "$c" nginx; n=$(cat "$TMP/kib"); cp "$TMP/why" "$TMP/n.why"
		[ "$c" = idle ] && R[cpu,n]+="$(cat "$TMP/cpu") "
		R[$c,f]+="$f " R[$c,n]+="$n "
		printf '%-7s fairgated %7.2f KiB  nginx %7.2f KiB  ratio %s   [fairgated:%s; nginx:%s]\n' "$c" "$f" "$n" \
			"$(awk -v f="$f" -v n="$n" 'BEGIN { if (n > 0) printf "%.2f", f / n; else print "n/a" }')" \
			"$(cat "$TMP/f.why")" "$(cat "$TMP/n.why")"
		if [ "$c" = idle ] && [ -n "$OTHER" ]; then
			measure idle other; R[idle,o]+="$(cat "$TMP/kib") " R[cpu,o]+="$(cat "$TMP/cpu") "
			printf '%-7s other     %7.2f KiB   [%s]\n' idle "$(cat "$TMP/kib")" "$(cat "$TMP/why")"
		fi
		if [ "$c" = idle ]; then
			printf '%-7s CPU over %s s, %% of a core: fairgated %s  nginx %s%s\n' idle "$IDLE_S" \
				"$(echo "${R[cpu,f]}" | awk '{ print $NF }')" "$(echo "${R[cpu,n]}" | awk '{ print $NF }')" \
				"$([ -n "$OTHER" ] && echo "  other $(echo "${R[cpu,o]}" | awk '{ print $NF }')")"
		fi
	done
done
med() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { if (NR) printf "%.2f (%.2f-%.2f)", v[int((NR + 1) / 2)], v[1], v[NR]; else printf "n/a" }'; }
med3() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { if (NR) printf "%.3f (%.3f-%.3f)", v[int((NR + 1) / 2)], v[1], v[NR]; else printf "n/a" }'; }
echo "== KiB of RSS per connection (per stream), median (range) of $ROUNDS rounds =="
for c in "${CASES[@]}"; do
	ratios=$(paste <(echo "${R[$c,f]}" | tr ' ' '\n' | grep .) <(echo "${R[$c,n]}" | tr ' ' '\n' | grep .) |
		awk '$2 > 0 { printf "%s ", $1 / $2 }')
	printf '%-7s fairgated %s  nginx %s  fairgated/nginx %s\n' "$c" "$(echo "${R[$c,f]}" | med)" \
		"$(echo "${R[$c,n]}" | med)" "$(echo "$ratios" | med)"
done
[ -n "$OTHER" ] && printf '%-7s other %s\n' idle "$(echo "${R[idle,o]}" | med)"
# idle CPU is measured in the idle case only (FG_BENCH_CASES may leave it out)
if [ -n "${R[cpu,f]:-}" ]; then
	echo "== idle CPU: % of a core over $IDLE_S s holding $N idle connections, median (range) of $ROUNDS rounds =="
	printf 'fairgated %s  nginx %s%s\n' "$(echo "${R[cpu,f]}" | med3)" "$(echo "${R[cpu,n]}" | med3)" \
		"$([ -n "$OTHER" ] && echo "  other ($OTHER) $(echo "${R[cpu,o]:-}" | med3)")"
fi
