#!/usr/bin/env bash
# tokenize.sh BUILD_DIR — what an exact prompt count costs a request, side by
# side in one run: the same chat request (40 KB and 120 KB of text, 1
# output token, not streamed) sent through fairgated (--no-bpf) to
# fairgate-sim (--speedup inf: the engine's own time is virtual, so what is
# measured is the proxy's) by two tenants whose tiers differ only in
# max_context: for "counted" (32,768) the request's bytes could make more
# tokens than the limit, so fairgated asks the engine's POST /tokenize
# before admitting it; for "uncounted" (131,072) it certainly fits and goes
# at once. Rounds interleave the two (the order alternates), each round's
# median client latency per tenant is taken, and the added latency is the
# median of the rounds' differences, with their range; fairgated's own
# wait for /tokenize (fairgate_tokenize_seconds) is printed beside it, and
# a small request's latency (never counted) for scale. Namespaces fgt-tkb-*,
# removed on exit.
set -u
BUILD=$(cd "${1:-build}" && pwd)
[ "$(id -u)" -eq 0 ] || { echo "tokenize bench: needs root (namespaces)"; exit 0; }
ROUNDS=${FG_BENCH_ROUNDS:-7} PER=${FG_BENCH_REQUESTS:-11}
source "$(dirname "$0")/netpair.inc"
netpair tkb 10.252.0
head -c 32 /dev/urandom >"$TMP/salt.key"
chmod 600 "$TMP/salt.key"
hash() { printf %s "$1" | sha256sum | cut -d' ' -f1; }
cat >"$TMP/policy.yaml" <<EOF
replica:
  model: {name: llama-3.3-70b, params: 70.55e9, layers: 80, kv_heads: 8, head_dim: 128, message_tokens: 4, reply_tokens: 3}
tiers:
  short: {max_context: 32768, kv_cap_tokens: 262144}
  long: {max_context: 131072, kv_cap_tokens: 262144}
tenants:
  - {name: counted, tier: short, units_per_s: 1000000000, keys: ["sha256:$(hash sk-counted)"]}
  - {name: uncounted, tier: long, units_per_s: 1000000000, keys: ["sha256:$(hash sk-uncounted)"]}
agent:
  listen: 0.0.0.0:8000
  engine: 127.0.0.1:8001
  metrics_listen: 127.0.0.1:9464
  salt_secret_file: $TMP/salt.key
EOF
start() { local log=$1; shift; "$@" >"$log" 2>&1 & PIDS+=($!); }
wait_port() {
	for _ in $(seq 100); do
		ip netns exec "$SNS" bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null && return 0
		sleep 0.1
	done
	echo "tokenize bench: nothing listens on :$1"; tail -5 "$TMP"/*.log; exit 1
}
start "$TMP/sim.log" ip netns exec "$SNS" "$BUILD/fairgate-sim" --policy "$TMP/policy.yaml" \
	--listen 0.0.0.0:8001 --speedup inf --no-enable-prefix-caching
start "$TMP/agent.log" ip netns exec "$SNS" "$BUILD/fairgated" --policy "$TMP/policy.yaml" \
	--ctl "$TMP/ctl.sock" --no-bpf
wait_port 8001; wait_port 8000

body() { # BYTES FILE
	printf '{"messages":[{"role":"user","content":"%s"}],"max_tokens":1}' \
		"$(yes 'the quick brown fox jumps over a lazy dog' | head -c "$1" | tr '\n' ' ')" >"$2"
}
body 40000 "$TMP/b40"
body 120000 "$TMP/b120"
body 200 "$TMP/small"
# median_ms KEY BODYFILE — the median client latency of PER requests, ms
median_ms() {
	for _ in $(seq "$PER"); do
		ip netns exec "$CNS" curl -s -o /dev/null -w '%{time_total}\n' "http://$SRV:8000/v1/chat/completions" \
			-H "Authorization: Bearer $1" -H 'Content-Type: application/json' --data-binary @"$2"
	done | sort -n | awk '{ v[NR] = $1 } END { printf "%.3f", 1000 * v[int((NR + 1) / 2)] }'
}
metric() {
	ip netns exec "$SNS" curl -s http://127.0.0.1:9464/metrics | awk -v m="$1" '$1 == m { print $2 }'
}

printf '%-8s %10s %12s %10s\n' body counted uncounted added
for size in 40 120; do
	diffs=()
	for r in $(seq "$ROUNDS"); do
		if [ $((r % 2)) -eq 1 ]; then
			c=$(median_ms sk-counted "$TMP/b$size"); u=$(median_ms sk-uncounted "$TMP/b$size")
		else
			u=$(median_ms sk-uncounted "$TMP/b$size"); c=$(median_ms sk-counted "$TMP/b$size")
		fi
		d=$(awk -v c="$c" -v u="$u" 'BEGIN { printf "%.3f", c - u }')
		diffs+=("$d")
		printf '%-8s %10s %12s %10s\n' "${size}KB" "$c" "$u" "$d"
	done
	printf '%s\n' "${diffs[@]}" | sort -n | awk -v s="$size" '{ v[NR] = $1 }
		END { printf "%s KB: added latency of an exact count, median of %d rounds %.2f ms (range %.2f..%.2f)\n",
			s, NR, v[int((NR + 1) / 2)], v[1], v[NR] }'
done
s=$(median_ms sk-counted "$TMP/small")
echo "a 200-byte request (never counted): median ${s} ms"
sum=$(metric fairgate_tokenize_seconds_sum) n=$(metric fairgate_tokenize_seconds_count)
ok=$(metric 'fairgate_tokenize_requests_total{outcome="ok"}')
awk -v s="$sum" -v n="$n" -v ok="$ok" 'BEGIN {
	printf "fairgated waited for /tokenize %.2f ms on average over %d calls (%d answered)\n", 1000 * s / n, n, ok }'
