#!/usr/bin/env bash
# proxy_tenants_max.sh — fairgated at the tenant limit: a generated policy
# of 65,536 tenants (FG_MAX_TENANTS), where "top", the last and so the
# highest id (65535), is served, billed and metered like any tenant: its
# request is admitted and empties its bucket, the next is refused with a
# 429, its quota window reaches the kernel, the XDP gate drops its source's
# SYN inside the window, and `bpftool map dump` of the tenants map names it.
# Prints fairgated's RSS after start (this build's; bench/tenant_memory.sh
# gives the release build's at 3 / 1,000 / 65,536 tenants).
source "$(dirname "$0")/proxy_env.inc"
need_root "65,536 tenants"
bpffs_ready

px_netns tmax 36
PIN=/sys/fs/bpf/fgt-px-tmax-$$
on_exit "rm -rf $PIN"
N=65536 TOP=65535
# top: 40 units/s, 5 s burst = 200 units; one request of 100 prompt and 57
# output tokens empties it (as in proxy_deny.sh). The others: a key each,
# never used (awk-made hashes: no 65,535 sha256 runs).
{
	cat <<EOF
tiers:
  standard: {weight: 1, max_context: 32768, kv_cap_tokens: 131072, burst_s: 10, max_queue_s: 30, priority: 0, default_max_tokens: 64}
  small: {weight: 1, max_context: 32768, kv_cap_tokens: 131072, burst_s: 5, max_queue_s: 30, priority: 0, default_max_tokens: 64}
tenants:
EOF
	awk -v n=$((N - 1)) 'BEGIN {
		for (i = 0; i < n; i++)
			printf "  - {name: t%05d, tier: standard, units_per_s: 1000, keys: [\"sha256:%08x%056d\"]}\n", i, i * 2654435761 % 4294967296, 0
	}'
	cat <<EOF
  - name: top
    tier: small
    units_per_s: 40
    keys: ["sha256:$(px_hash $PX_KEY_B)"]
agent:
  listen: 0.0.0.0:8000
  engine: 127.0.0.1:8001
  metrics_listen: 127.0.0.1:9464
  salt_secret_file: $PX_TMP/salt.key
  protected_ports: [8000]
  interfaces: [px-s]
  xdp_mode: native
  deny_allowance_per_s: 0
EOF
} >"$PX_TMP/policy.yaml"
px_start_sim --speedup 0
t0=$(date +%s%N)
spawn "$PX_TMP/agent.log" nsenter --net=/run/netns/"$PX_SNS" "$FG_BUILD/fairgated" \
	--policy "$PX_TMP/policy.yaml" --ctl "$PX_TMP/ctl.sock" --pin-dir "$PIN" --cleanup
PX_AGENT_PID=$SPAWNED_PID
wait_port "$PX_SNS" 127.0.0.1 8000 20 || { tap_fail "fairgated starts with $N tenants" "$(tail -5 "$PX_TMP/agent.log")"; exit 1; }
echo "# fairgated with $N tenants: serving after $(( ($(date +%s%N) - t0) / 1000000 )) ms," \
	"RSS $(awk '/^VmRSS/ { print $2 }' /proc/"$PX_AGENT_PID"/status) kB (this build)"
# (not `status --json`: with 65,536 tenants it is a JSON object each, and
# took most of this test's time; the gate's attach is logged before serving)
if ! grep -q "gate attached to px-s" "$PX_TMP/agent.log"; then
	tap_skip "$N tenants through the gate" "kernel enforcement unavailable: $(grep -m1 'kernel enforcement off' "$PX_TMP/agent.log")"
	exit 0
fi
export FAIRGATE_PIN_DIR=$PIN FAIRGATE_CTL=$PX_TMP/ctl.sock
show() { "$FG_BUILD/fairgatectl" tenant show top --json; }
probe() { ip netns exec "$PX_CNS" "$FG_BUILD/fg-tcpprobe" connect "$PX_SRV" 8000 --src "$1" --timeout-ms "${2:-800}" | tail -1; }

expect_eq "the maps know top by name at id $TOP" "$(show | jq -r .id)" "$TOP"
ids=$(seq -s, 1 100)
# two requests on one connection (the gate learns a source within its
# index rebuild, 500 ms, so a second connection could still come in): the
# first is admitted and empties the bucket, the second is refused
codes=$(pc "$PX_URL/v1/completions" "$PX_URL/v1/completions" -H "Authorization: Bearer $PX_KEY_B" \
	-d "{\"prompt\":[$ids],\"max_tokens\":57}" -o /dev/null -o /dev/null -w '%{http_code} ')
expect_eq "top's request is admitted, its next one, over the quota, gets a 429" "$codes" "200 429 "
j=$(show)
expect_eq "the maps count them: admitted 1, refused 1" "$(jq -r '"\(.quota.admitted) \(.quota.rejected)"' <<<"$j")" "1 1"
# the books the agent publishes into top's slot (a lookup of one key)
billed=$(bpftool map lookup pinned "$PIN/tenants" key 0xff 0xff 0 0 -j |
	jq -r '(.formatted.value // .value).quota.units_billed_milli / 1000')
check "top was billed for the first (${billed} units: 100 prompt + 57 output tokens)" \
	awk -v b="$billed" 'BEGIN { exit !(b > 150 && b < 260) }'
expect_eq "top's quota window is in the kernel, opened by the quota controller" \
	"$(jq -r .deny_source <<<"$j")" quota
learned=$(bpftool map dump pinned "$PIN/src_learned" -j 2>/dev/null |
	jq -r '.[] | (.formatted.value.tenant_id // .value.tenant_id)' | sort -u | head -1)
expect_eq "the kernel learned top's source address (tenant id $TOP)" "$learned" "$TOP"
r=$(probe "$PX_CLI" 600)
check "inside the window top's SYN goes unanswered: XDP dropped it ($r)" bash -c "[[ '$r' == timeout* ]]"
delayed=$(show | jq -r '.. | .syn_delayed? // empty' | head -1)
check "and counted it against top ($delayed SYNs delayed)" test "${delayed:-0}" -ge 1
# the whole map, as an operator reads it: 65,536 slots named by BTF, read
# as it streams (its JSON form is 240 MB: too slow for jq)
t0=$(date +%s%N)
read -r slots named < <(bpftool map dump pinned "$PIN/tenants" 2>/dev/null |
	awk -v top="$TOP" '$1 == "\"key\":" { k = $2 + 0; n++ }
		$1 == "\"name\":" && k == top && !seen++ { gsub(/[",]/, "", $2); name = $2 }
		END { printf "%d %s\n", n, (name == "" ? "-" : name) }')
echo "# bpftool map dump of the tenants map: $(( ($(date +%s%N) - t0) / 1000000 )) ms"
expect_eq "bpftool map dump holds all $N slots" "$slots" "$N"
expect_eq "and shows slot $TOP by name" "$named" top
reserved=$(show | jq -r '.. | .reserved_units? // empty' | head -1)
expect_eq "no reservation left behind" "$reserved" 0
px_stop_agent_clean
