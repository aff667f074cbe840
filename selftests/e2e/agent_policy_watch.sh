#!/usr/bin/env bash
# agent_policy_watch.sh — fairgated with its policy in a ConfigMap-like
# directory and its tenants in a Secret-like one (--tenants), both updated
# the way the kubelet does (a new ..data directory swapped in by rename):
# an edit is applied without anyone running fairgatectl, through the same
# all-or-nothing transaction as `policy apply` (a broken edit or one that
# takes a restart changes nothing and is reported once, the next good one
# applies); unrelated events re-apply nothing; --no-watch turns it off.
# Also the probes (`fairgatectl health`: live means the event loop answers
# in time, so a stopped agent fails it; --ready means the proxy accepts,
# at the address it is bound to when that is not every address)
# and --metrics-address (the node's address, nothing else).
source "$(dirname "$0")/deploy_env.inc"
need_root "the policy watch: namespaces"

NS=fgt-pw-n$$ NSC=fgt-pw-c$$ IF=fgpw$$ IFC=fgpwc$$
NODE=198.18.50.1 CLIENT=198.18.50.2
TMP=$(mktemp -d /tmp/fgt-pw.XXXXXX)
CTL=$TMP/ctl.sock
export FAIRGATE_CTL=$CTL
on_exit "rm -rf $TMP"
netns_add "$NS"
netns_add "$NSC"
veth_pair "$NS" "$IF" "$NSC" "$IFC"
ip -n "$NS" addr add $NODE/24 dev "$IF"
ip -n "$NSC" addr add $CLIENT/24 dev "$IFC"
head -c 32 /dev/urandom >"$TMP/salt.key"
chmod 600 "$TMP/salt.key"
mkdir -p "$TMP/policy" "$TMP/tenants"
hash() { printf %s "$1" | sha256sum | cut -d' ' -f1; }

policy() { # BURST_S [LISTEN_PORT [LISTEN_HOST]]
	cat <<EOF
tiers:
  standard: {weight: 1, max_context: 32768, kv_cap_tokens: 131072, burst_s: $1, max_queue_s: 30}
agent:
  listen: ${3:-0.0.0.0}:${2:-8000}
  engine: 127.0.0.1:8001
  metrics_listen: 127.0.0.1:9464
  salt_secret_file: $TMP/salt.key
EOF
}
tenant() { # NAME [TIER]
	printf '  - {name: %s, tier: %s, units_per_s: 1000, keys: ["sha256:%s"]}\n' "$1" "${2:-standard}" "$(hash "sk-$1")"
}
policy 10 | kubelet_write "$TMP/policy" policy.yaml
{ echo "tenants:"; tenant alpha; } | kubelet_write "$TMP/tenants" tenants.yaml
P=$TMP/policy/policy.yaml T=$TMP/tenants/tenants.yaml

cat "$P" <({ echo "tenants:"; tenant alpha; }) >"$TMP/sim.yaml"
spawn "$TMP/sim.log" ip netns exec "$NS" "$FG_BUILD/fairgate-sim" --policy "$TMP/sim.yaml" \
	--listen 127.0.0.1:8001 --speedup 0
wait_port "$NS" 127.0.0.1 8001 10 || { tap_fail "fairgate-sim starts" "$(tail -3 "$TMP/sim.log")"; exit 1; }

out=$("$FG_BUILD/fairgated" --policy "$P" --tenants "$T" --metrics-address node-ip 2>&1); rc=$?
check "--metrics-address takes a numeric address only (rc $rc)" \
	bash -c "[ $rc = 2 ] && grep -q 'not a numeric IPv4 or IPv6 address' <<<'$out'"

AGENT="" RUN=0
start_agent() { # ARGS...
	RUN=$((RUN + 1))
	ip netns exec "$NS" "$FG_BUILD/fairgated" --policy "$P" --tenants "$T" --ctl "$CTL" --no-bpf \
		--metrics-address $NODE "$@" >"$TMP/agent.$RUN.log" 2>&1 &
	AGENT=$!
	on_exit "kill -CONT $AGENT 2>/dev/null; kill -KILL $AGENT 2>/dev/null"
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
ctl() { "$FG_BUILD/fairgatectl" "$@"; }
watch() { ctl status --json | jq -c ".policy_watch | $1"; }
# until_watch JQ — wait for the watch to get there (a change takes the
# settle time and a pass of the loop)
until_watch() {
	for _ in $(seq 50); do
		[ "$(watch "$1")" = true ] && return 0
		sleep 0.1
	done
	return 1
}
chat() { # KEY -> HTTP code
	ip netns exec "$NSC" curl -s -o /dev/null -w '%{http_code}' --max-time 10 \
		"http://$NODE:8000/v1/chat/completions" -H "Authorization: Bearer $1" \
		-H 'Content-Type: application/json' -d '{"messages":[{"role":"user","content":"hi"}],"max_tokens":4}'
}
ntenants() { ctl status --json | jq .tenant_count; }

check "fairgated starts on a ConfigMap and a Secret (--tenants)" start_agent
check "... and watches both directories" grep -q "watching $TMP/policy and $TMP/tenants for policy changes" "$TMP/agent.$RUN.log"
expect_eq "status: the watch is on, no change yet" "$(watch '[.on, .files, .applied, .refused]')" "[true,[\"$P\",\"$T\"],0,0]"
expect_eq "alpha is served" "$(chat sk-alpha)" 200
expect_eq "beta is not a tenant yet" "$(chat sk-beta)" 401

# ---- probes ----
check "liveness: fairgatectl health" ctl health
check "readiness: fairgatectl health --ready (in the node namespace)" ip netns exec "$NS" "$FG_BUILD/fairgatectl" health --ready
check "... --json says where the proxy listens" \
	bash -c "ip netns exec $NS $FG_BUILD/fairgatectl health --ready --json | jq -e '.ready and .agent.listen_port == 8000' >/dev/null"
kill -STOP "$AGENT"
t0=$(date +%s%N)
out=$(ctl health --timeout 1 2>&1); rc=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
check "a stopped event loop fails liveness in about its timeout (rc $rc, $ms ms)" \
	bash -c "[ $rc = 1 ] && [ $ms -lt 2500 ] && grep -q 'not live: .*no answer from fairgated within 1000 ms' <<<'$out'"
kill -CONT "$AGENT"
check "... and passes again once it runs" ctl health

# ---- metrics on the node address ----
expect_eq "metrics on --metrics-address" "$(ip netns exec "$NSC" curl -s -o /dev/null -w '%{http_code}' --max-time 5 http://$NODE:9464/metrics)" 200
expect_eq "... not on the policy's 127.0.0.1" "$(ip netns exec "$NS" curl -s -o /dev/null -w '%{http_code}' --max-time 5 http://127.0.0.1:9464/metrics)" 000
expect_eq "... and status says where" "$(ctl status --json | jq -r .metrics_listen)" "$NODE:9464"

# ---- the Secret edited: a tenant added without exec ----
{ echo "tenants:"; tenant alpha; tenant beta; } | kubelet_write "$TMP/tenants" tenants.yaml
check "a tenant added to the Secret is applied" until_watch '.applied == 1'
expect_eq "... all or nothing, as policy apply" "$(watch .last_result)" '"applied: 2 tenants (1 added, 0 removed)"'
check "... logged" grep -q "applied policy $P: 2 tenants (1 added, 0 removed)" "$TMP/agent.$RUN.log"
expect_eq "... beta is served" "$(chat sk-beta)" 200
touch "$TMP/tenants/unrelated"; rm "$TMP/tenants/unrelated"
sleep 0.6
expect_eq "an event that changes no text applies nothing" "$(watch '[.applied, .refused]')" "[1,0]"

# ---- broken edits change nothing ----
{ echo "tenants:"; tenant alpha; tenant beta gold; } | kubelet_write "$TMP/tenants" tenants.yaml
check "a tenant of no tier is refused" until_watch '.refused == 1'
expect_eq "... naming the Secret's file and line" "$(watch .last_result)" \
	"\"$T:3:24: tenants[1].tier: unknown tier 'gold' (not defined under tiers)\""
check "... one log line" grep -q "policy watch: not applied, the running policy stays: $T:3:24" "$TMP/agent.$RUN.log"
expect_eq "... alpha and beta are still served" "$(chat sk-alpha) $(chat sk-beta)" "200 200"
{ echo "tenants:"; tenant alpha; tenant beta gold; } | kubelet_write "$TMP/tenants" tenants.yaml
sleep 0.6
expect_eq "the same broken text again is not retried" "$(watch '[.applied, .refused]')" "[1,1]"
{ echo "tenants:"; tenant alpha; tenant beta; } | kubelet_write "$TMP/tenants" tenants.yaml
check "the Secret mended: applied again" until_watch '.applied == 2'
policy 10 8080 | kubelet_write "$TMP/policy" policy.yaml
check "a change that takes a restart is refused" until_watch '.refused == 2'
check "... saying so" grep -q 'agent.listen differs from the running agent.s; it takes a restart (nothing was changed)' <<<"$(watch .last_result)"
{ echo "tenants:"; tenant alpha; tenant beta; tenant gamma; } | kubelet_write "$TMP/tenants" tenants.yaml
check "with the policy still refused, a tenant edit is refused too (the pair is one policy)" until_watch '.refused == 3'
expect_eq "... gamma is not served" "$(chat sk-gamma)" 401
policy 20 | kubelet_write "$TMP/policy" policy.yaml
check "the next good edit applies (policy and tenants together)" until_watch '.applied == 3'
expect_eq "... gamma is served" "$(chat sk-gamma)" 200
expect_eq "... with the ConfigMap's new burst (20 s x 1000 units/s)" \
	"$(ctl status --json | jq '.tenants[] | select(.name == "gamma") | .burst_units')" 20000

# ---- policy apply and check take the pair too ----
{ echo "tenants:"; tenant alpha; } >"$TMP/t2.yaml"
check "policy check FILE --tenants FILE" ctl policy check "$P" --tenants "$TMP/t2.yaml"
out=$(ctl policy check "$P" --tenants "$P" 2>&1); rc=$?
check "... a policy file given as the tenants file is refused (rc $rc)" \
	bash -c "[ $rc = 2 ] && grep -q \"a tenants file holds one mapping with the key 'tenants'\" <<<\"\$1\"" _ "$out"
check "policy apply FILE --tenants FILE" ctl policy apply "$P" --tenants "$TMP/t2.yaml"
expect_eq "... applied by hand: 1 tenant" "$(ntenants)" 1
stop_agent

# ---- --no-watch ----
check "fairgated --no-watch starts" start_agent --no-watch
expect_eq "status: the watch is off" "$(watch .on)" false
{ echo "tenants:"; tenant alpha; tenant delta; } | kubelet_write "$TMP/tenants" tenants.yaml
sleep 0.6
expect_eq "... an edit is not applied" "$(chat sk-delta)" 401
stop_agent

# ---- readiness of a proxy bound to one address ----
policy 10 8000 $NODE | kubelet_write "$TMP/policy" policy.yaml
check "fairgated starts with agent.listen $NODE:8000" start_agent
expect_eq "... it serves there" "$(chat sk-alpha)" 200
out=$(ip netns exec "$NS" "$FG_BUILD/fairgatectl" health --ready 2>&1); rc=$?
check "readiness probes the listener's own address, not loopback (rc $rc: $out)" test $rc -eq 0
stop_agent
exit 0
