#!/usr/bin/env bash
# datapath_steer.sh — transparent mode end to end: an "engine" listens on
# the protected port in the node namespace, fairgated (proxy on another
# port) steers client connections to itself with sk_lookup; the agent's own
# upstream path reaches the engine; a tenant in a shed window is refused by
# steer when no gate runs on its interface; with fairgated gone, clients
# reach the engine directly (fail-open).
source "$(dirname "$0")/lib.sh"
need_root "datapath steer e2e"
bpffs_ready

NSN=fgt-dp-sn$$ NSC=fgt-dp-sc$$ IFN=fgdpsn$$ IFC=fgdpsc$$
PIN=/sys/fs/bpf/fgt-dp-s$$
TMP=$(mktemp -d /tmp/fgt-dp-s-XXXXXX)
CTL=$TMP/ctl.sock
PROBE=$FG_BUILD/fg-tcpprobe CTLBIN=$FG_BUILD/fairgatectl
export FAIRGATE_PIN_DIR=$PIN FAIRGATE_CTL=$CTL
on_exit "rm -rf $TMP"
on_exit "rm -rf $PIN"

netns_add "$NSN"
netns_add "$NSC"
veth_pair "$NSN" "$IFN" "$NSC" "$IFC"
ip -n "$NSN" addr add 198.18.8.1/24 dev "$IFN"
ip -n "$NSC" addr add 198.18.8.2/24 dev "$IFC"
ip -n "$NSC" addr add 198.18.8.3/24 dev "$IFC"

# The engine: accepts and closes, so an HTTP client gets an empty reply.
spawn "$TMP/engine.log" ip netns exec "$NSN" "$PROBE" listen 0.0.0.0 8000
cat >"$TMP/policy.yaml" <<EOF
tiers:
  standard: {}
tenants:
  - name: alpha
    tier: standard
    units_per_s: 1000
    keys: ["sha256:$(printf 'sk-alpha' | sha256sum | cut -d' ' -f1)"]
    sources: [198.18.8.2/32]
agent:
  mode: transparent
  listen: 0.0.0.0:18080
  engine: 127.0.0.1:8000
  metrics_listen: 127.0.0.1:19464
  protected_ports: [8000]
  interfaces: []
  deny_allowance_per_s: 0
EOF
nsenter --net=/run/netns/"$NSN" "$FG_BUILD/fairgated" --policy "$TMP/policy.yaml" --pin-dir "$PIN" \
	--ctl "$CTL" >"$TMP/fairgated.log" 2>&1 &
AGENT=$!
on_exit "kill -TERM $AGENT 2>/dev/null; sleep 0.3; kill -KILL $AGENT 2>/dev/null"
for _ in $(seq 100); do [ -S "$CTL" ] && break; sleep 0.1; done
check "fairgated runs in transparent mode" grep -q "steer attached" "$TMP/fairgated.log"

# Who answers node:8000? The agent speaks HTTP (an OpenAI error for a
# request without a key); the engine stand-in closes without a word.
who() { # SRC
	local code
	code=$(ip netns exec "$NSC" curl -s -o /dev/null -w '%{http_code}' --interface "$1" \
		--max-time 3 http://198.18.8.1:8000/v1/models)
	case $? in
	0) echo "agent:$code" ;;
	52 | 56) echo engine ;; # accepted, then closed unanswered
	7) echo refused ;;
	*) echo "error:$?" ;;
	esac
}
expect_eq "a client's connection to the engine port reaches the agent" "$(who 198.18.8.2)" "agent:401"
expect_eq "another client's too" "$(who 198.18.8.3)" "agent:401"
expect_eq "the agent's own path to the engine is not steered" \
	"$(ip netns exec "$NSN" curl -s -o /dev/null --max-time 3 http://127.0.0.1:8000/; r=$?; [ $r = 56 ] && r=52; echo $r)" 52
steered=$(bpftool map dump pinned "$PIN/node_stats" | grep -o '"steered": [0-9]*' | awk '{s+=$2} END {print s}')
check "steer counted its hand-overs ($steered)" test "${steered:-0}" -ge 2

"$CTLBIN" tenant deny alpha --mode shed --for 5m >/dev/null
expect_eq "shed: steer refuses alpha (no gate on this interface)" "$(who 198.18.8.2)" refused
expect_eq "shed: the other client is untouched" "$(who 198.18.8.3)" "agent:401"
expect_eq "shed: counted as a steer refusal" \
	"$("$CTLBIN" tenant show alpha --json | grep -o '"steer_refused": [0-9]*')" '"steer_refused": 1'
"$CTLBIN" tenant allow alpha >/dev/null
expect_eq "allow: alpha reaches the agent again" "$(who 198.18.8.2)" "agent:401"

kill -TERM "$AGENT"; wait "$AGENT" 2>/dev/null
expect_eq "fairgated gone: clients reach the engine (fail-open)" "$(who 198.18.8.2)" engine
exit 0
