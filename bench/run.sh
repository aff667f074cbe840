#!/usr/bin/env bash
# run.sh BUILD_DIR — every benchmark, one after the other (`make bench`):
# the proxy's (bench/proxy.sh: fairgated vs the simulator vs nginx, decision
# cost, 429s/s), the datapath's (bench/gate.sh: gate ns/packet, SYN-flood
# drop rate), then any other bench/*.sh (idle_memory.sh: memory and idle CPU
# per connection; tenants.sh: CPU per request by tenant count;
# fleet_tenants.sh: agent.fleet's tick on an idle node by tenant count; fleet.sh,
# tokenize.sh), and finally the flood comparison
# of the two: SYNs/s the gate drops vs 429s/s the agent can answer.
set -u
BUILD=${1:-build}
DIR=$(cd "$(dirname "$0")" && pwd)
OUT=$(mktemp -d /tmp/fgt-bench.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
rc=0

run() { # NAME
	echo
	echo "######## bench/$1"
	FG_BENCH_RESULTS="$OUT/$1.results" bash "$DIR/$1" "$BUILD" 2>&1 | tee "$OUT/$1.out"
	[ "${PIPESTATUS[0]}" -eq 0 ] || { echo "bench/$1 failed"; rc=1; }
}
run proxy.sh
[ -f "$DIR/gate.sh" ] && run gate.sh
for b in "$DIR"/*.sh; do
	case $(basename "$b") in run.sh | proxy.sh | gate.sh) continue ;; esac
	run "$(basename "$b")"
done

echo
echo "######## flood: what an over-quota tenant's flood costs, kernel vs agent"
agent=$(sed -n 's/^agent_429_per_s=//p' "$OUT/proxy.sh.results" 2>/dev/null)
gate=$(sed -n 's/^gate dropped (delay): .* = \([0-9.]*\) packets\/s$/\1/p' "$OUT/gate.sh.out" 2>/dev/null)
if [ -n "$agent" ] && [ -n "$gate" ]; then
	awk -v g="$gate" -v a="$agent" 'BEGIN {
		printf "gate drops %.0f SYNs/s; the agent answers %.0f 429s/s: the kernel sheds %.0fx more\n", g, a, g / a }'
else
	echo "(a number is missing: gate='${gate:-}' agent='${agent:-}')"
fi
exit $rc
