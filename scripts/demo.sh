#!/usr/bin/env bash
# demo.sh BUILD_DIR — `make demo`: fairgate-sim and fairgated (with the XDP
# gate) in a network namespace, running examples/policy.yaml; three tenants
# drive load from their own source ranges in a client namespace (acme and
# globex inside their quotas, initech far over its own); then what happened
# per tenant, and the BPF maps as bpftool shows them; then a burst from one
# tenant queued fairly while another keeps its latency, and the seed's
# scenarios in virtual time. While the load runs a
# per-tenant table refreshes every second (share of replica time billed,
# queued, KV reserved, 429s, kernel sheds); at the end a summary and the
# virtual-time scenario table (fg-scenarios: the same gateway code against
# the simulator's engine model). Last, the fleet (agent.fleet): three nodes
# and a Redis, one tenant's contract held fleet-wide while its load moves
# from 33/33/33 to 80/10/10 (FG_DEMO_FLEET=0 skips it).
#
# Only the agent block is rewritten (addresses inside the namespaces) and
# initech's burst is cut to 5 s so its limit shows within seconds.
set -u
BUILD=$(cd "${1:-build}" && pwd)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SECS=${FG_DEMO_SECONDS:-8}
[ "$(id -u)" -eq 0 ] || { echo "demo: needs root (network namespaces, BPF)"; exit 1; }
for b in fairgated fairgatectl fairgate-sim fg-load; do
	[ -x "$BUILD/$b" ] || { echo "demo: $BUILD/$b missing; run make first"; exit 1; }
done

SNS=fgt-demo-s CNS=fgt-demo-c PIN=/sys/fs/bpf/fgt-demo
TMP=$(mktemp -d /tmp/fgt-demo.XXXXXX)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
	for ns in "$SNS" "$CNS" "${FLEET_NS[@]}"; do ip netns del "$ns" 2>/dev/null; done
	rm -rf "$TMP" "$PIN"
}
trap cleanup EXIT
FLEET_NS=(fgt-demo-fh fgt-demo-f1 fgt-demo-f2 fgt-demo-f3)
cleanup_stale() { for ns in "$SNS" "$CNS" "${FLEET_NS[@]}"; do ip netns del "$ns" 2>/dev/null; done; rm -rf "$PIN"; }
cleanup_stale
mount | grep -q 'on /sys/fs/bpf type bpf' || mount -t bpf bpf /sys/fs/bpf

# the node (server ns) and the tenants' clients, each in the source range the
# example policy gives it: acme 10.1.0.0/16, globex 10.2.0.0/16, initech 192.168.30.0/24
ip netns add "$SNS" && ip netns add "$CNS" || exit 1
ip link add demo-s netns "$SNS" type veth peer name demo-c netns "$CNS"
for ns in "$SNS" "$CNS"; do ip -n "$ns" link set lo up; done
ip -n "$SNS" link set demo-s up && ip -n "$CNS" link set demo-c up
for a in 10.1.0.1/16 10.2.0.1/16 192.168.30.1/24; do ip -n "$SNS" addr add $a dev demo-s; done
for a in 10.1.0.2/16 10.2.0.2/16 192.168.30.2/24; do ip -n "$CNS" addr add $a dev demo-c; done
head -c 32 /dev/urandom >"$TMP/salt.key"
chmod 600 "$TMP/salt.key"

sed -e '/^agent:/,$d' -e '/- name: initech/,/cache:/s/units_per_s: 3000/units_per_s: 3000\n    burst_s: 5/' \
	"$ROOT/examples/policy.yaml" >"$TMP/policy.yaml"
cat >>"$TMP/policy.yaml" <<EOF
agent:
  mode: front
  listen: 0.0.0.0:8000
  engine: 127.0.0.1:8001
  protected_ports: [8000]
  interfaces: [demo-s]
  xdp_mode: native
  deny_allowance_per_s: 2
  metrics_listen: 127.0.0.1:9464
  salt_secret_file: $TMP/salt.key
  peak_window_s: 2
EOF

echo "== fairgate demo: examples/policy.yaml, $SECS s of load =="
"$BUILD/fairgatectl" policy check "$TMP/policy.yaml" || exit 1
ip netns exec "$SNS" "$BUILD/fairgate-sim" --policy "$TMP/policy.yaml" --listen 127.0.0.1:8001 \
	--speedup 4 --enable-prompt-tokens-details >"$TMP/sim.log" 2>&1 &
PIDS+=($!)
nsenter --net=/run/netns/"$SNS" "$BUILD/fairgated" --policy "$TMP/policy.yaml" --pin-dir "$PIN" \
	--ctl "$TMP/ctl.sock" --cleanup >"$TMP/agent.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do
	ip netns exec "$SNS" bash -c 'exec 3<>/dev/tcp/127.0.0.1/8000' 2>/dev/null && break
	sleep 0.1
done
sed 's/^/  agent: /' "$TMP/agent.log"

load() { # NAME KEY TARGET RATE PROMPT_CHARS MAX_TOKENS
	ip netns exec "$CNS" "$BUILD/fg-load" --target "$3:8000" --duration "$SECS" --drain 10 \
		--connections 16 --poisson --prefix-chars 400 --tenant "$1:$2:$4:$5:$6" \
		>"$TMP/$1.json" 2>"$TMP/$1.err" &
	PIDS+=($!)
}
echo "driving: acme 4 req/s, globex 2 req/s (inside their quotas), initech 25 req/s (~8x its 3000 units/s)"
load acme sk-acme-demo 10.1.0.1 4 2000 200
load globex sk-globex-demo 10.2.0.1 2 2000 200
load initech sk-initech-demo 192.168.30.1 25 2000 300
# The live table: one snapshot a second from the agent (fairgatectl status)
# and the kernel (fairgatectl tenant list: gate's counters).
live_table() {
	local st tl
	st=$("$BUILD/fairgatectl" status --json --ctl "$TMP/ctl.sock" 2>/dev/null) || return
	tl=$(FAIRGATE_PIN_DIR=$PIN "$BUILD/fairgatectl" tenant list --json 2>/dev/null || echo '{"tenants":[]}')
	jq -rn --argjson s "$st" --arg t "$1" '
		"t=\($t)s  queued \($s.scheduling.queued), backlog \($s.scheduling.backlog_s * 100 | round / 100) s, " +
		"KV \($s.scheduling.kv.reserved_tokens)/\($s.scheduling.kv.reservable_tokens), overload " +
		(if $s.scheduling.overload.level < 0 then "none" else ($s.scheduling.overload.shed_tiers | join(",")) end)'
	jq -rn --argjson s "$st" --argjson k "$tl" '
		($s.tenants | map(.units_billed) | add) as $all |
		(["tenant", "share", "queued", "inflight", "KV reserved", "429s", "timeouts", "kernel sheds", "delayed"] | @tsv),
		($s.tenants[] | . as $x |
		 (($k.tenants[] | select(.name == $x.name) | .counters) // {}) as $c |
		 [$x.name,
		  (if $all > 0 then "\(($x.units_billed / $all * 1000 | round) / 10)%" else "-" end),
		  $x.queued, $x.inflight, "\($x.kv_reserved_tokens)/\($x.kv_cap_tokens)",
		  ($x.outcomes.rate_limited + $x.outcomes.queue_timeout), $x.outcomes.queue_timeout,
		  ($c.syn_shed // 0), ($c.syn_delayed // 0)] | @tsv)' | column -t -s $'\t'
}
lines=0
for t in $(seq 1 $((SECS + 1))); do
	sleep 1
	out=$(live_table "$t")
	if [ -t 1 ] && [ "$lines" -gt 0 ]; then printf '\033[%dA\033[J' "$lines"; fi
	printf '%s\n' "$out"
	lines=$(printf '%s\n' "$out" | wc -l)
done
for n in acme globex initech; do wait "${PIDS[-1]}" 2>/dev/null; unset 'PIDS[-1]'; done
sleep 0.5

echo
echo "== per tenant (client view from fg-load, server view from fairgatectl status) =="
printf '%-8s %6s %6s %6s %10s %12s %12s %12s %s\n' tenant sent 200 429 "p50 ms" "billed u" "bucket u" "units/s" deny
for n in acme globex initech; do
	read -r sent ok r429 p50 <<<"$(jq -r '.tenants[0] | "\(.sent) \(.status["200"] // 0) \(.status["429"] // 0) \(.latency_ms.p50 // 0)"' "$TMP/$n.json")"
	read -r billed bucket rate deny <<<"$("$BUILD/fairgatectl" status --json --ctl "$TMP/ctl.sock" |
		jq -r --arg t "$n" '.tenants[] | select(.name == $t) | "\(.units_billed) \(.bucket_units) \(.units_per_s) \(.deny_window_open)"')"
	printf '%-8s %6s %6s %6s %10.1f %12.0f %12.0f %12.0f %s\n' "$n" "$sent" "$ok" "$r429" "$p50" \
		"$billed" "$bucket" "$rate" "$deny"
done
echo
"$BUILD/fairgatectl" status --ctl "$TMP/ctl.sock"

echo
echo "== bpftool map dump pinned $PIN/tenants (active slots) =="
bpftool map dump pinned "$PIN/tenants" -j |
	jq -c '.[] | (.formatted.value // .value) | select(.flags == 1) |
		{name, tier, verdict, deny_source, deny_until_ns, quota: {bucket_units: .quota.bucket_units,
		 rate_units_per_s: .quota.rate_units_per_s, reserved_units: .quota.reserved_units,
		 inflight: .quota.inflight, admitted: .quota.admitted, rejected: .quota.rejected}}'
echo
echo "== bpftool map dump pinned $PIN/src_learned (sources the agent attributed) =="
bpftool map dump pinned "$PIN/src_learned" -j | jq -c '.[] | (.formatted // .)' | head -10
echo
echo "== gate counters per tenant (fairgatectl tenant show) =="
for n in acme globex initech; do
	FAIRGATE_PIN_DIR=$PIN "$BUILD/fairgatectl" tenant show "$n" 2>/dev/null | grep -E "^tenant|SYNs"
done

echo
echo "== summary =="
live_table end
"$BUILD/fairgatectl" status --json --ctl "$TMP/ctl.sock" | jq -r '.scheduling |
	"engine: \(.engine.preemptions) preemptions seen; peaks: node \(.peaks.node_peak_units_per_s | round) units/s, " +
	"oversubscription \(.peaks.oversubscription * 100 | round / 100) (\(.peaks.windows_closed) windows of \(.peaks.window_s) s closed)"'

# Phase 2: fair queueing live. globex drops 40 prompts of ~6,000 tokens at
# once (inside its bucket, so all admitted: ~9 s of replica time) while acme
# keeps its pace; the gateway queues globex's burst behind the shallow engine
# window and acme's requests go around it.
echo
echo "== phase 2: globex bursts 40 x 6,000-token prompts; acme keeps 4 req/s =="
phase1_p50=$(jq -r '(.tenants[0].latency_ms.p50 // 0) | round' "$TMP/acme.json")
ip netns exec "$CNS" "$BUILD/fg-load" --target 10.2.0.1:8000 --closed --connections 40 --requests 40 \
	--drain 60 --tenant "globex:sk-globex-demo:0:24000:200" >"$TMP/burst.json" 2>"$TMP/burst.err" &
PIDS+=($!)
ip netns exec "$CNS" "$BUILD/fg-load" --target 10.1.0.1:8000 --duration 6 --drain 30 --connections 16 \
	--poisson --prefix-chars 400 --tenant "acme:sk-acme-demo:4:2000:200" >"$TMP/acme2.json" 2>"$TMP/acme2.err" &
PIDS+=($!)
lines=0
for t in $(seq 1 7); do
	sleep 1
	out=$(live_table "$t")
	if [ -t 1 ] && [ "$lines" -gt 0 ]; then printf '\033[%dA\033[J' "$lines"; fi
	printf '%s\n' "$out"
	lines=$(printf '%s\n' "$out" | wc -l)
done
wait "${PIDS[-1]}" 2>/dev/null; unset 'PIDS[-1]'
wait "${PIDS[-1]}" 2>/dev/null; unset 'PIDS[-1]'
jq -r --arg p1 "$phase1_p50" '.tenants[0] |
	"acme during the burst: \(.status["200"] // 0) of \(.sent) served, p50 \(.latency_ms.p50 | round) ms, p99 \(.latency_ms.p99 | round) ms (before the burst: p50 \($p1) ms)"' "$TMP/acme2.json"
jq -r '.tenants[0] | "globex burst: \(.status["200"] // 0) of \(.sent) served, p50 \(.latency_ms.p50 | round) ms, p99 \(.latency_ms.p99 | round) ms (queued at the gateway, not in the engine)"' "$TMP/burst.json"

if [ -x "$BUILD/fg-scenarios" ]; then
	echo
	echo "== the same gateway code in virtual time against the engine model (build/fg-scenarios) =="
	"$BUILD/fg-scenarios"
fi

[ "${FG_DEMO_FLEET:-1}" != 0 ] || exit 0
if ! command -v redis-server >/dev/null; then
	echo; echo "(fleet phase skipped: redis-server missing; scripts/deps.sh installs it)"; exit 0
fi
# Phase 3: the fleet. Three nodes (fairgate-sim + fairgated each, in their own
# namespaces) and a Redis in a hub namespace with the client. One tenant,
# acme, has 3000 units/s for the whole fleet (agent.fleet, period_s 1); its
# load, ~1.5x that, is spread evenly and then moves to 80/10/10. Every node
# admits from its own bucket; the buckets hold leases from the fleet bucket.
echo
echo "== phase 3: the fleet: acme's 3000 units/s held across three nodes and a Redis =="
FH=${FLEET_NS[0]} FNET=10.254.9 FREDIS=10.254.9.254
ip netns add "$FH" || exit 1
ip -n "$FH" link set lo up
ip -n "$FH" link add flbr type bridge && ip -n "$FH" link set flbr up
ip -n "$FH" addr add $FREDIS/24 dev flbr
head -c 24 /dev/urandom | base64 >"$TMP/redis.pass"
chmod 600 "$TMP/redis.pass"
mkdir -p "$TMP/redis"
(cd "$TMP/redis" && exec ip netns exec "$FH" redis-server --bind $FREDIS --port 6379 --dir "$TMP/redis" \
	--save '' --appendonly no --pidfile '' --requirepass "$(cat "$TMP/redis.pass")" --daemonize no) \
	>"$TMP/redis.log" 2>&1 &
PIDS+=($!)
hash() { printf %s "$1" | sha256sum | cut -d' ' -f1; }
for i in 1 2 3; do
	ns=${FLEET_NS[$i]}
	ip netns add "$ns" || exit 1
	ip -n "$ns" link set lo up
	ip link add fl-n netns "$ns" type veth peer name "fl-h$i" netns "$FH"
	ip -n "$FH" link set "fl-h$i" master flbr up
	ip -n "$ns" link set fl-n up
	ip -n "$ns" addr add "$FNET.$i/24" dev fl-n
	cat >"$TMP/fleet$i.yaml" <<EOF
tiers:
  standard: {weight: 1, max_context: 32768, burst_s: 1, max_queue_s: 30, default_max_tokens: 16}
tenants:
  - {name: acme, tier: standard, units_per_s: 3000, keys: ["sha256:$(hash sk-acme-demo)"]}
agent:
  listen: 0.0.0.0:8000
  engine: 127.0.0.1:8001
  metrics_listen: 127.0.0.1:9464
  peak_window_s: 4
  fleet: {redis: "$FREDIS:6379", node: node$i, period_s: 1, password_file: $TMP/redis.pass}
EOF
	ip netns exec "$ns" "$BUILD/fairgate-sim" --policy "$TMP/fleet$i.yaml" --listen 127.0.0.1:8001 \
		--speedup 0 >"$TMP/fsim$i.log" 2>&1 &
	PIDS+=($!)
done
for _ in $(seq 100); do
	ip netns exec "$FH" redis-cli --no-auth-warning -h $FREDIS -a "$(cat "$TMP/redis.pass")" PING 2>/dev/null |
		grep -q PONG && break
	sleep 0.1
done
for i in 1 2 3; do
	ip netns exec "${FLEET_NS[$i]}" "$BUILD/fairgated" --policy "$TMP/fleet$i.yaml" --ctl "$TMP/fctl$i.sock" \
		--no-bpf >"$TMP/fagent$i.log" 2>&1 &
	PIDS+=($!)
done
for i in 1 2 3; do
	for _ in $(seq 150); do
		ip netns exec "${FLEET_NS[$i]}" bash -c 'exec 3<>/dev/tcp/127.0.0.1/8000' 2>/dev/null && break
		sleep 0.1
	done
	grep -m1 "the store answers" "$TMP/fagent$i.log" | sed "s/^/  node$i: /"
done
fmetric() { # I NAME
	ip netns exec "${FLEET_NS[$1]}" curl -sS --max-time 2 http://127.0.0.1:9464/metrics |
		awk -v m="$2" '$1 == m { v = $2 } END { print v + 0 }'
}
fload() { # I REQ_PER_S SECS
	ip netns exec "$FH" "$BUILD/fg-load" --target "$FNET.$1:8000" --duration "$3" --drain 5 --connections 16 \
		--tenant "acme:sk-acme-demo:$2:400:16" >"$TMP/fload$1.$2.json" 2>/dev/null &
	PIDS+=($!)
}
ACME_UNITS='fairgate_tenant_units_total{tenant="acme"}'
ACME_LEASE='fairgate_fleet_tenant_rate_units_per_second{tenant="acme"}'
billed() { echo "$(fmetric 1 "$ACME_UNITS") $(fmetric 2 "$ACME_UNITS") $(fmetric 3 "$ACME_UNITS")"; }
# one line a second: units/s admitted per node and fleet-wide, and each
# node's lease (the rate its bucket refills at, from the fleet bucket)
watch_fleet() { # SECS PHASE
	local prev now t0 t1 t
	prev=$(billed) t0=$(date +%s.%N)
	for t in $(seq "$1"); do
		sleep 1
		now=$(billed) t1=$(date +%s.%N)
		printf '%s\n%s\n' "$prev" "$now" | awk -v t0="$t0" -v t1="$t1" -v t="$t" -v ph="$2" \
			-v l1="$(fmetric 1 "$ACME_LEASE")" -v l2="$(fmetric 2 "$ACME_LEASE")" -v l3="$(fmetric 3 "$ACME_LEASE")" '
			NR == 1 { split($0, a) } NR == 2 { dt = t1 - t0; s = 0
				for (i = 1; i <= 3; i++) { d[i] = ($i - a[i]) / dt; s += d[i] }
				printf "%-8s t=%ds  units/s admitted: node1 %5.0f  node2 %5.0f  node3 %5.0f  fleet %5.0f (%3.0f%%)  leases %4.0f %4.0f %4.0f\n",
					ph, t, d[1], d[2], d[3], s, s / 30, l1, l2, l3
				printf "%s %d %.1f %.1f %.3f\n", ph, t, s, s * dt, dt > "/dev/stderr" }' 2>>"$TMP/fleet.watch"
		prev=$now t0=$t1
	done
}
echo "acme offers ~4500 units/s, 1.5x its fleet contract: 11.5 req/s at each node, then 27.6/3.45/3.45"
echo "(fleet: % of the 3000 contract; leases: what each node's bucket refills at, in units/s)"
echo "(the first second spends the fleet's burst: 1 s of the contract)"
fleet_phase() { # NAME RATE1 RATE2 RATE3
	fload 1 "$2" 9; fload 2 "$3" 9; fload 3 "$4" 9
	watch_fleet 8 "$1"
	for _ in 1 2 3; do wait "${PIDS[-1]}" 2>/dev/null; unset 'PIDS[-1]'; done
}
fleet_phase 33/33/33 11.5 11.5 11.5
fleet_phase 80/10/10 27.6 3.45 3.45
# per phase: what the fleet admitted against one bucket of the contract
# (its rate over the phase plus its 3000-unit depth, which refills whenever
# the fleet admits less than the contract: before the load, in a shift)
awk '{ u[$1] += $4; t[$1] += $5 } END { for (p in u) printf "%s: the fleet admitted %.0f units in %.1f s, %.0f units/s (contract 3000; one bucket allows %.0f)\n", p, u[p], t[p], u[p] / t[p], 3000 * t[p] + 3000 }' \
	"$TMP/fleet.watch" | sort -r
echo
"$BUILD/fairgatectl" fleet --ctl "$TMP/fctl1.sock"
