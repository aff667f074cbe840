#!/usr/bin/env bash
# tenant_memory.sh BUILD_DIR [OTHER_BUILD_DIR] — fairgated's memory and
# reload time by tenant count: for 3, 1,000 and 65,536 tenants (FG_BENCH_TENANTS),
# a generated policy (a key each), fairgated started fresh with it
# (--no-bpf: the process's own memory; the BPF maps are kernel memory, the
# same whatever the policy, see README "BPF maps"), and
#   rss    VmRSS once it serves (kB), and VmHWM, the peak on the way there
#   start  ms from exec to the listener answering
#   reload ms fairgated's loop spent on `fairgatectl policy apply` of the
#          same tenants at another rate (every tenant kept), parse + apply,
#          as the agent reports it (apply_ms + parse_ms of the reply; a
#          build without them: the client's round trip, which includes the
#          client's own parse of the file, marked ~)
#   apply rtt  the client's round trip (its parse + the agent's), for both
# With OTHER_BUILD_DIR (a build before a change), both binaries run side by
# side in each round and the ratios BUILD/OTHER are printed. ROUNDS
# (FG_BENCH_ROUNDS, default 3): medians and ranges. No engine runs (the
# agent starts and reloads without one). Namespaces fgt-tmb-* are removed
# on exit.
set -u
BUILD=$(cd "${1:-build}" && pwd)
OTHER=${2:+$(cd "$2" && pwd)}
[ "$(id -u)" -eq 0 ] || { echo "tenant_memory bench: needs root (namespaces)"; exit 0; }
ROUNDS=${FG_BENCH_ROUNDS:-3}
COUNTS=${FG_BENCH_TENANTS:-3 1000 65536}
source "$(dirname "$0")/netpair.inc"
netpair tmb 10.254.7
head -c 32 /dev/urandom >"$TMP/salt.key"
chmod 600 "$TMP/salt.key"

# policy N RATE — N tenants, awk-made key hashes (never used)
policy() {
	cat <<EOF
tiers:
  standard: {weight: 1, max_context: 32768, kv_cap_tokens: 131072, burst_s: 10, max_queue_s: 30, default_max_tokens: 64}
tenants:
EOF
	awk -v n="$1" -v r="$2" 'BEGIN {
		for (i = 0; i < n; i++)
			printf "  - {name: t%05d, tier: standard, units_per_s: %d, keys: [\"sha256:%08x%056d\"]}\n", i, r, i * 2654435761 % 4294967296, 0
	}'
	cat <<EOF
agent:
  listen: 127.0.0.1:8000
  engine: 127.0.0.1:8001
  metrics_listen: 127.0.0.1:9464
  salt_secret_file: $TMP/salt.key
EOF
}

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# one BUILD N — prints "rss hwm start_ms reload_ms apply_rtt_ms"
one() {
	local b=$1 n=$2 pid t0 started rss hwm r0 reload rtt
	t0=$(now_ms)
	ip netns exec "$SNS" "$b/fairgated" --policy "$TMP/p$n.yaml" --ctl "$TMP/ctl.sock" --no-bpf \
		>"$TMP/agent.log" 2>&1 &
	pid=$!
	for _ in $(seq 1 600); do
		ip netns exec "$SNS" bash -c 'exec 3<>/dev/tcp/127.0.0.1/8000' 2>/dev/null && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	started=$(( $(now_ms) - t0 ))
	sleep 0.5
	rss=$(awk '/^VmRSS/ { print $2 }' /proc/$pid/status 2>/dev/null)
	hwm=$(awk '/^VmHWM/ { print $2 }' /proc/$pid/status 2>/dev/null)
	r0=$(now_ms)
	if "$b/fairgatectl" policy apply "$TMP/q$n.yaml" --ctl "$TMP/ctl.sock" --json >"$TMP/apply.json" 2>"$TMP/apply.err"; then
		rtt=$(( $(now_ms) - r0 ))
		reload=$(jq -r 'if .apply_ms then (.apply_ms + .parse_ms | floor) else empty end' "$TMP/apply.json")
		[ -n "$reload" ] || reload="~$rtt"
	else
		reload=fail rtt=fail
	fi
	kill -TERM "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	[ -n "$rss" ] || { echo "tenant_memory bench: fairgated did not start with $n tenants: $(tail -3 "$TMP/agent.log")" >&2; exit 1; }
	echo "$rss $hwm $started $reload $rtt"
}

# stats VALUES... — "median (min-max)"
stats() { printf '%s\n' "$@" | tr -d '~' | sort -n | awk '{ v[NR] = $1 } END { printf "%s (%s-%s)", v[int((NR + 1) / 2)], v[1], v[NR] }'; }
median() { printf '%s\n' "$@" | tr -d '~' | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

printf '%-8s %-6s %-26s %-26s %-20s %-20s %-20s\n' tenants build "RSS kB" "peak RSS kB" "start ms" "reload ms" "apply rtt ms"
for n in $COUNTS; do
	policy "$n" 1000 >"$TMP/p$n.yaml"
	policy "$n" 2000 >"$TMP/q$n.yaml"
	declare -A col=()
	for ((r = 0; r < ROUNDS; r++)); do
		for b in "$BUILD" ${OTHER:+"$OTHER"}; do
			read -r rss hwm st rl rtt < <(one "$b" "$n") || exit 1
			col[$b.rss]+="$rss " col[$b.hwm]+="$hwm " col[$b.st]+="$st " col[$b.rl]+="$rl " col[$b.rtt]+="$rtt "
		done
	done
	for b in "$BUILD" ${OTHER:+"$OTHER"}; do
		# shellcheck disable=SC2086
		printf '%-8s %-6s %-26s %-26s %-20s %-20s %-20s\n' "$n" "$([ "$b" = "$BUILD" ] && echo this || echo other)" \
			"$(stats ${col[$b.rss]})" "$(stats ${col[$b.hwm]})" "$(stats ${col[$b.st]})" "$(stats ${col[$b.rl]})" \
			"$(stats ${col[$b.rtt]})"
	done
	if [ -n "$OTHER" ]; then
		# shellcheck disable=SC2086
		awk -v a="$(median ${col[$BUILD.rss]})" -v b="$(median ${col[$OTHER.rss]})" \
			-v c="$(median ${col[$BUILD.rtt]})" -v d="$(median ${col[$OTHER.rtt]})" -v n="$n" \
			'BEGIN { printf "%-8s ratio  RSS this/other %.2f, apply round trip this/other %.2f\n", n, a / b, (d > 0 ? c / d : 0) }'
	fi
	unset col
done
