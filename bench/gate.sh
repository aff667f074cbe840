#!/usr/bin/env bash
# gate.sh BUILD_DIR — the datapath benchmark (`make bench` runs it):
#  1. ns/packet of gate against a bare XDP_DROP, side by side, through
#     BPF_PROG_TEST_RUN (fg-gate-bench: repeat ≥ 1e6, medians of 9 runs;
#     the shed case through a restoring helper and one packet per run, see
#     fg-gate-bench.c);
#  2. the rate at which gate, attached by fairgated in native mode on a
#     veth, drops a SYN flood of a tenant in a delay window, next to the rate
#     the generator offered; then the same flood in a shed window, where the
#     tenant's RST budget answers a few and drops the rest. (The same flood against the agent's 429s waits
#     for the proxy.)
# Everything runs in namespaces it creates (prefix fgt-dpb-) and is removed
# on exit; the flood never leaves the veth pair.
set -u
BUILD=$(cd "${1:-build}" && pwd)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
[ "$(id -u)" -eq 0 ] || { echo "gate bench: needs root (BPF, namespaces)"; exit 0; }

NSN=fgt-dpb-n$$ NSC=fgt-dpb-c$$ IFN=fgdpbn$$ IFC=fgdpbc$$
PIN=/sys/fs/bpf/fgt-dpb-$$ TMP=$(mktemp -d /tmp/fgt-dpb-XXXXXX)
AGENT=""
cleanup() {
	[ -n "$AGENT" ] && kill -TERM "$AGENT" 2>/dev/null && wait "$AGENT" 2>/dev/null
	ip netns del "$NSN" 2>/dev/null
	ip netns del "$NSC" 2>/dev/null
	rm -rf "$PIN" "$TMP"
}
trap cleanup EXIT
mount | grep -q 'on /sys/fs/bpf type bpf' || mount -t bpf bpf /sys/fs/bpf

ip netns add "$NSN" && ip netns add "$NSC" || exit 1
ip link add "$IFN" netns "$NSN" type veth peer name "$IFC" netns "$NSC"
ip -n "$NSN" link set "$IFN" up
ip -n "$NSN" link set lo up
ip -n "$NSC" link set "$IFC" up
ip -n "$NSN" addr add 198.18.9.1/24 dev "$IFN"
ip -n "$NSC" addr add 198.18.9.2/24 dev "$IFC"
IFC_INDEX=$(ip netns exec "$NSC" cat /sys/class/net/"$IFC"/ifindex)

echo "== gate: ns/packet vs a bare XDP_DROP (BPF_PROG_TEST_RUN) =="
"$BUILD/fg-gate-bench" --runs "${FG_BENCH_RUNS:-9}" --repeat "${FG_BENCH_REPEAT:-1000000}" || exit 1

echo
echo "== gate: SYN flood on a veth, native XDP, tenant in a delay window =="
cat >"$TMP/policy.yaml" <<EOF
tiers:
  standard: {}
tenants:
  - name: flooder
    tier: standard
    units_per_s: 1000
    keys: ["sha256:$(printf 'sk-flood' | sha256sum | cut -d' ' -f1)"]
    sources: [198.18.9.2/32]
agent:
  listen: 127.0.0.1:18090
  engine: 127.0.0.1:18091
  metrics_listen: 127.0.0.1:19465
  protected_ports: [8000]
  interfaces: [$IFN]
  xdp_mode: native
  deny_allowance_per_s: 0
EOF
nsenter --net=/run/netns/"$NSN" "$BUILD/fairgated" --policy "$TMP/policy.yaml" --pin-dir "$PIN" \
	--ctl "$TMP/ctl.sock" --cleanup >"$TMP/agent.log" 2>&1 &
AGENT=$!
for _ in $(seq 100); do [ -S "$TMP/ctl.sock" ] && break; sleep 0.1; done
export FAIRGATE_PIN_DIR=$PIN FAIRGATE_CTL=$TMP/ctl.sock
if ! "$BUILD/fairgatectl" tenant deny flooder --mode delay --for 10m >/dev/null; then
	echo "gate bench: fairgated did not start:"; cat "$TMP/agent.log"; exit 1
fi
counters() { # -> the flooder's SYNs "delayed shed shed_dropped" so far
	"$BUILD/fairgatectl" tenant show flooder --json |
		jq -r '.counters | "\(.syn_delayed) \(.syn_shed) \(.shed_dropped)"'
}
flood_run() { # one flood; sets D_DELAYED D_SHED D_DROPPED (what gate counted) and ELAPSED
	local d0 s0 x0 d1 s1 x1 t0 t1
	read -r d0 s0 x0 <<<"$(counters)"
	t0=$(date +%s.%N)
	nsenter --net=/run/netns/"$NSC" "$BUILD/fg-gate-bench" --flood "$IFC_INDEX" --src 198.18.9.2 \
		--seconds "${FG_BENCH_FLOOD_S:-3}"
	t1=$(date +%s.%N)
	read -r d1 s1 x1 <<<"$(counters)"
	D_DELAYED=$((d1 - d0)) D_SHED=$((s1 - s0)) D_DROPPED=$((x1 - x0))
	ELAPSED=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
}
flood_run
awk -v n=$D_DELAYED -v t="$ELAPSED" \
	'BEGIN { printf "gate dropped (delay): %d SYNs in %.2f s = %.0f packets/s\n", n, t, n / t }'

echo
echo "== gate: the same flood with the tenant in a shed window (RST budget: the default 200/s) =="
"$BUILD/fairgatectl" tenant deny flooder --mode shed --for 10m >/dev/null
flood_run
awk -v r=$D_SHED -v d=$D_DROPPED -v t="$ELAPSED" 'BEGIN {
	printf "gate (shed): %d SYNs in %.2f s = %.0f packets/s; %d answered with an RST (%.0f/s), %d dropped past the budget\n",
		r + d, t, (r + d) / t, r, r / t, d }'
echo "(429s from the agent for the same flood: measured with the proxy)"
