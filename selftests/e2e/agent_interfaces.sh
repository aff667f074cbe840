#!/usr/bin/env bash
# agent_interfaces.sh — where gate attaches, and what fairgated needs to
# attach it, on a node namespace with two NICs (the default route on one)
# and fairgate-sim on port 8000 in transparent mode:
# - a listed interface that is missing turns off gate there only: one log
#   line, `fairgatectl status` says so, gate runs on the other, steer, the
#   maps and the proxy go on (a tenant is served through both NICs);
# - interfaces: auto attaches where the default route goes, not elsewhere;
#   with no default route gate is off (one line, status says why) and the
#   rest runs;
# - exactly `fairgated --capabilities` is enough (setpriv), including after
#   a SIGKILL (the dead agent's gate, pinned, is replaced without
#   CAP_SYS_ADMIN); without CAP_PERFMON the error names it.
source "$(dirname "$0")/lib.sh"
need_root "gate's interfaces"
bpffs_ready

NS=fgt-if-n$$ NSC=fgt-if-c$$ IFA=fgifa$$ IFAC=fgifac$$ IFB=fgifb$$ IFBC=fgifbc$$
NODE_A=198.18.40.1 CLI_A=198.18.40.2 NODE_B=198.18.41.1 CLI_B=198.18.41.2
PIN=/sys/fs/bpf/fgt-if-$$
TMP=$(mktemp -d /tmp/fgt-if.XXXXXX)
CTL=$TMP/ctl.sock
export FAIRGATE_CTL=$CTL FAIRGATE_PIN_DIR=$PIN
on_exit "rm -rf $TMP"
on_exit "rm -rf $PIN"
netns_add "$NS"
netns_add "$NSC"
veth_pair "$NS" "$IFA" "$NSC" "$IFAC"
veth_pair "$NS" "$IFB" "$NSC" "$IFBC"
ip -n "$NS" addr add $NODE_A/24 dev "$IFA"
ip -n "$NS" addr add $NODE_B/24 dev "$IFB"
ip -n "$NSC" addr add $CLI_A/24 dev "$IFAC"
ip -n "$NSC" addr add $CLI_B/24 dev "$IFBC"
ip -n "$NS" route add default via $CLI_A dev "$IFA"
head -c 32 /dev/urandom >"$TMP/salt.key"
chmod 600 "$TMP/salt.key"
KEY=sk-if-acme

policy() { # INTERFACES
	cat <<EOF
tiers:
  standard: {weight: 1, max_context: 32768, kv_cap_tokens: 131072, burst_s: 60, max_queue_s: 30}
tenants:
  - name: acme
    tier: standard
    units_per_s: 100000
    keys: ["sha256:$(printf %s $KEY | sha256sum | cut -d' ' -f1)"]
agent:
  mode: transparent
  engine: $NODE_A:8000
  protected_ports: [8000]
  interfaces: $1
  xdp_mode: native
  metrics_listen: 127.0.0.1:9464
  salt_secret_file: $TMP/salt.key
EOF
}
policy auto >"$TMP/sim-policy.yaml"
spawn "$TMP/sim.log" ip netns exec "$NS" "$FG_BUILD/fairgate-sim" --policy "$TMP/sim-policy.yaml" \
	--listen 0.0.0.0:8000 --speedup 0
wait_port "$NS" 127.0.0.1 8000 10 || { tap_fail "fairgate-sim starts" "$(tail -3 "$TMP/sim.log")"; exit 1; }

AGENT="" RUN=0
# start_agent POLICY_TEXT [PREFIX...] — fairgated in the node namespace
start_agent() {
	local text=$1; shift
	RUN=$((RUN + 1))
	printf '%s\n' "$text" >"$TMP/policy.$RUN.yaml"
	nsenter --net=/run/netns/"$NS" "$@" "$FG_BUILD/fairgated" --policy "$TMP/policy.$RUN.yaml" \
		--pin-dir "$PIN" --ctl "$CTL" >"$TMP/agent.$RUN.log" 2>&1 &
	AGENT=$!
	on_exit "kill -KILL $AGENT 2>/dev/null"
	for _ in $(seq 100); do
		grep -q "fairgated: running" "$TMP/agent.$RUN.log" && return 0
		kill -0 "$AGENT" 2>/dev/null || break
		sleep 0.1
	done
	return 1
}
stop_agent() {
	local rc=0
	kill -TERM "$AGENT" 2>/dev/null
	wait "$AGENT" 2>/dev/null || rc=$?
	check "fairgated (run $RUN) exits cleanly" \
		bash -c "[ $rc = 0 ] && ! grep -qE 'Sanitizer|runtime error' '$TMP/agent.$RUN.log'"
}
log() { cat "$TMP/agent.$RUN.log"; }
gate_json() { "$FG_BUILD/fairgatectl" status --json | jq -c "[.gate.interfaces[] | {name, attached, mode, error}]"; }
xdp_on() { ip -n "$NS" link show "$1" | grep -q 'prog/xdp'; }
chat() { # SRC NODE -> HTTP code
	ip netns exec "$NSC" curl -s -o /dev/null -w '%{http_code}' --max-time 10 --interface "$1" \
		"http://$2:8000/v1/chat/completions" -H "Authorization: Bearer $KEY" \
		-H 'Content-Type: application/json' -d '{"messages":[{"role":"user","content":"hi"}],"max_tokens":4}'
}

# ---- a missing interface: gate off there only ----
check "fairgated starts with interfaces [$IFA, nosuch0]" start_agent "$(policy "[$IFA, nosuch0]")"
expect_eq "one log line for the missing one" "$(log | grep -c 'nosuch0')" 1
check "... naming it and why" grep -q "gate (XDP) off on nosuch0: XDP attach to nosuch0 failed: no such interface" <<<"$(log)"
expect_eq "status: gate on $IFA (native), off on nosuch0" "$(gate_json)" \
	"[{\"name\":\"$IFA\",\"attached\":true,\"mode\":\"native\",\"error\":null},{\"name\":\"nosuch0\",\"attached\":false,\"mode\":null,\"error\":\"XDP attach to nosuch0 failed: no such interface\"}]"
check "status (text) says so" grep -q "off on nosuch0: XDP attach to nosuch0 failed: no such interface" \
	<<<"$("$FG_BUILD/fairgatectl" status)"
expect_eq "kernel enforcement stays on" "$("$FG_BUILD/fairgatectl" status --json | jq .kernel_enforcement)" true
check "gate runs on $IFA" xdp_on "$IFA"
check "steer attached" grep -q "steer attached" <<<"$(log)"
expect_eq "a tenant is served through the gated NIC" "$(chat $CLI_A $NODE_A)" 200
expect_eq "... and through the other (steer)" "$(chat $CLI_B $NODE_B)" 200
check "the maps are published (bpftool reads the tenant)" \
	bash -c "bpftool map dump pinned $PIN/tenants | grep -q '\"name\": \"acme\"'"
stop_agent
check "stopped: gate detached" bash -c "! ip -n $NS link show $IFA | grep -q prog/xdp"

# ---- interfaces: auto ----
check "fairgated starts with interfaces: auto" start_agent "$(policy auto)"
expect_eq "status: gate where the default route goes" "$("$FG_BUILD/fairgatectl" status --json | jq -c '[.gate.auto, [.gate.interfaces[] | .name, .attached]]')" \
	"[true,[\"$IFA\",true]]"
check "... and not on $IFB" bash -c "! ip -n $NS link show $IFB | grep -q prog/xdp"
expect_eq "a tenant is served" "$(chat $CLI_A $NODE_A)" 200
stop_agent
ip -n "$NS" route del default
check "auto without a default route: fairgated starts" start_agent "$(policy auto)"
check "... one line saying gate is off and why" \
	grep -q "gate (XDP) off: interfaces: auto: this network namespace has no default route" <<<"$(log)"
expect_eq "... status says so" "$("$FG_BUILD/fairgatectl" status --json | jq -c '[.kernel_enforcement, .gate.note]')" \
	'[true,"this network namespace has no default route"]'
expect_eq "... and steer still hands clients to the proxy" "$(chat $CLI_B $NODE_B)" 200
stop_agent
ip -n "$NS" route add default via $CLI_A dev "$IFA"

# ---- exactly the capabilities fairgated lists ----
caps=$("$FG_BUILD/fairgated" --capabilities | cut -f1 | sed 's/^CAP_//' | tr 'A-Z\n' 'a-z,' | sed 's/,$//')
only=(setpriv --inh-caps=-all --bounding-set="-all,+${caps//,/,+}")
check "with only $caps (${only[*]}): fairgated starts" start_agent "$(policy auto)" "${only[@]}"
expect_eq "... its effective set is those" "$(awk '/CapEff/ {print $2}' /proc/$AGENT/status)" 000000c000001000
check "... gate attached" grep -q "gate attached to $IFA (native)" <<<"$(log)"
check "... steer attached" grep -q "steer attached" <<<"$(log)"
expect_eq "... a tenant is served" "$(chat $CLI_A $NODE_A)" 200
check "... the gate program is pinned while attached" test -e "$PIN/gate_prog"
kill -KILL "$AGENT"; wait "$AGENT" 2>/dev/null
check "SIGKILL: its gate stays attached" xdp_on "$IFA"
check "restarted with the same capabilities" start_agent "$(policy auto)" "${only[@]}"
check "... it replaced the dead agent's gate (no CAP_SYS_ADMIN to name it)" \
	bash -c "grep -q 'gate attached to $IFA (native)' '$TMP/agent.$RUN.log' && ! grep -q 'already attached' '$TMP/agent.$RUN.log'"
expect_eq "... a tenant is served" "$(chat $CLI_A $NODE_A)" 200
stop_agent
check "... no program pin left once detached" test ! -e "$PIN/gate_prog"
noperf=(setpriv --inh-caps=-all --bounding-set="-all,+bpf,+net_admin")
start_agent "$(policy auto)" "${noperf[@]}"
kill -TERM "$AGENT" 2>/dev/null; wait "$AGENT" 2>/dev/null
check "without CAP_PERFMON: the error names it" \
	grep -q "kernel enforcement off: loading the gate program: Permission denied — fairgated lacks CAP_PERFMON" <<<"$(log)"
exit 0
