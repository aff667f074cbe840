#!/usr/bin/env bash
# fleet_tenants.sh BUILD_DIR — what agent.fleet's tick costs an idle node by
# tenant count: fairgated (--no-bpf, on CPU 0) with a generated policy of
# 3, 1,000 or 65,536 tenants (FG_BENCH_TENANT_COUNTS; random key hashes, no
# request is sent), agent.fleet at period_s 1 against a redis-server of its
# own in the namespace (on CPU 1), one count after the other. Printed: the
# agent process's CPU time (user + sys, all threads, from /proc) as a share
# of a core over consecutive windows of FG_BENCH_FLEET_WINDOW_S (10) seconds
# from when it serves, FG_BENCH_FLEET_WINDOWS (3) of them. The first window
# holds every tenant's first call and its idle declaration; after that an
# idle node's tick should cost what its few awake tenants cost, whatever the
# policy's size. Namespaces fgt-ftb-*, removed on exit; Redis runs in a
# temp dir (its cwd too), killed by PID.
set -u
BUILD=$(cd "${1:-build}" && pwd)
[ "$(id -u)" -eq 0 ] || { echo "fleet_tenants bench: needs root (namespaces)"; exit 0; }
command -v redis-server >/dev/null || { echo "fleet_tenants bench: needs redis-server (scripts/deps.sh)"; exit 1; }
read -ra COUNTS <<<"${FG_BENCH_TENANT_COUNTS:-3 1000 65536}"
WIN=${FG_BENCH_FLEET_WINDOW_S:-10} WINDOWS=${FG_BENCH_FLEET_WINDOWS:-3}
source "$(dirname "$0")/netpair.inc"
netpair ftb 10.247.0
head -c 24 /dev/urandom | base64 >"$TMP/redis.pass"
head -c 32 /dev/urandom >"$TMP/salt.key"
chmod 600 "$TMP/redis.pass" "$TMP/salt.key"

mkdir -p "$TMP/redis"
(cd "$TMP/redis" && exec ip netns exec "$SNS" taskset -c 1 redis-server --bind 127.0.0.1 --port 6379 \
	--dir "$TMP/redis" --save '' --appendonly no --requirepass "$(cat "$TMP/redis.pass")" \
	--daemonize no --pidfile '') >"$TMP/redis.log" 2>&1 &
PIDS+=($!)

policy() { # N
	tenants_head
	random_hashes "$1" |
		awk '{ printf "  - {name: t%05d, tier: standard, units_per_s: 100, keys: [\"sha256:%s\"]}\n", NR - 1, $0 }'
	cat <<EOF
agent:
  listen: 127.0.0.1:8010
  engine: 127.0.0.1:8002
  metrics_listen: 127.0.0.1:9479
  salt_secret_file: $TMP/salt.key
  fleet: {redis: "127.0.0.1:6379", node: n1, period_s: 1, password_file: $TMP/redis.pass}
EOF
}
serving() { ip netns exec "$SNS" bash -c 'exec 3<>/dev/tcp/127.0.0.1/8010' 2>/dev/null; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

echo "== agent.fleet's tick on an idle node, by tenant count (period_s 1, a local Redis; CPU 0, Redis on CPU 1) =="
printf '%-8s' tenants
for w in $(seq "$WINDOWS"); do printf ' %16s' "$(((w - 1) * WIN))-$((w * WIN)) s"; done
echo
for n in "${COUNTS[@]}"; do
	[[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] || { echo "fleet_tenants bench: a tenant count must be 1 or more, not '$n'"; exit 1; }
	policy "$n" >"$TMP/policy.$n.yaml"
	ip netns exec "$SNS" taskset -c 0 "$BUILD/fairgated" --policy "$TMP/policy.$n.yaml" \
		--ctl "$TMP/ctl.$n.sock" --no-bpf >"$TMP/agent.$n.log" 2>&1 &
	pid=$!
	PIDS+=("$pid")
	for _ in $(seq 300); do serving && break; sleep 0.1; done
	serving || { echo "fleet_tenants bench: the $n-tenant agent does not serve"; tail -n 5 "$TMP/agent.$n.log"; exit 1; }
	printf '%-8s' "$n"
	for _ in $(seq "$WINDOWS"); do
		c0=$(cpu_ticks "$pid")
		sleep "$WIN"
		c1=$(cpu_ticks "$pid")
		printf ' %16s' "$(awk -v d=$((c1 - c0)) -v hz="$hz" -v s="$WIN" 'BEGIN { printf "%.1f%%", d / hz / s * 100 }')"
	done
	echo
	kill -0 "$pid" 2>/dev/null || { echo "fleet_tenants bench: the $n-tenant agent exited"; tail -n 5 "$TMP/agent.$n.log"; exit 1; }
	kill -TERM "$pid"
	wait "$pid" 2>/dev/null
done
echo "   (the agent's CPU time as a share of one core in each window after it serves; nothing is sent to it)"
