#!/usr/bin/env bash
# proxy_transparent.sh — transparent mode end to end: fairgate-sim keeps the
# protected port 8000 in the node namespace; fairgated (agent.mode:
# transparent, no agent.listen: an ephemeral loopback port) gets the clients'
# connections through the sk_lookup `steer` program and forwards them to the
# engine at agent.engine = the node's own address, port 8000, without being
# steered back to itself. Clients are real (curl, fg-load) in another
# namespace over two veths: one where the XDP gate runs, one without.
# Checked: steering over IPv4 and IPv6, clients cannot dodge the agent by
# dialling agent.engine, metering (429 after the burst), cache_salt injected
# (the simulator's prefix cache), streaming, no loop, a shed tenant refused
# by steer (SK_DROP) and by gate without charging the allowance twice,
# fail-open when fairgated stops and re-steering when it restarts, and
# agent.steer_fail_open: false (refused while fairgated is down, a restart
# takes over the pinned link, a reload back to fail-open, --cleanup).
source "$(dirname "$0")/lib.sh"
need_root "transparent mode (sk_lookup)"
bpffs_ready

NSN=fgt-tp-n$$ NSC=fgt-tp-c$$
IFA=fgtpa$$ IFAC=fgtpac$$ IFB=fgtpb$$ IFBC=fgtpbc$$
NODE_A=198.18.20.1 NODE_B=198.18.21.1 NODE_B6=fd10:21::1
ACME_A=198.18.20.2 GLOBEX_A=198.18.20.3 ACME_B=198.18.21.2 GLOBEX_B=198.18.21.3 ACME_B6=fd10:21::2
PIN=/sys/fs/bpf/fgt-tp-$$
TMP=$(mktemp -d /tmp/fgt-tp-XXXXXX)
CTL=$TMP/ctl.sock CTLBIN=$FG_BUILD/fairgatectl
export FAIRGATE_PIN_DIR=$PIN FAIRGATE_CTL=$CTL
on_exit "rm -rf $TMP"
on_exit "rm -rf $PIN"

netns_add "$NSN"
netns_add "$NSC"
veth_pair "$NSN" "$IFA" "$NSC" "$IFAC"
veth_pair "$NSN" "$IFB" "$NSC" "$IFBC"
ip -n "$NSN" addr add $NODE_A/24 dev "$IFA"
ip -n "$NSN" addr add $NODE_B/24 dev "$IFB"
ip -n "$NSN" addr add $NODE_B6/64 dev "$IFB" nodad
ip -n "$NSC" addr add $ACME_A/24 dev "$IFAC"
ip -n "$NSC" addr add $GLOBEX_A/24 dev "$IFAC"
ip -n "$NSC" addr add $ACME_B/24 dev "$IFBC"
ip -n "$NSC" addr add $GLOBEX_B/24 dev "$IFBC"
ip -n "$NSC" addr add $ACME_B6/64 dev "$IFBC" nodad
head -c 32 /dev/urandom >"$TMP/salt.key"

# The example policy with this test's client addresses, a small bucket for
# acme (so it meets a 429 soon) and the agent block of transparent mode.
policy() { # FAIL_OPEN
	sed -n '/^# The node agent/q; p' "$FG_ROOT/examples/policy.yaml" |
		sed -e "s|units_per_s: 9000 .*|units_per_s: 100|" \
			-e "s|sources: \[10.1.0.0/16.*|sources: [$ACME_A/32, $ACME_B/32, \"$ACME_B6/128\"]|" \
			-e "s|sources: \[10.2.0.0/16\]|sources: [$GLOBEX_A/32, $GLOBEX_B/32]|"
	cat <<EOF
agent:
  mode: transparent
  engine: $NODE_A:8000
  protected_ports: [8000]
  interfaces: [$IFA]
  xdp_mode: generic
  deny_allowance_per_s: 0.2
  metrics_listen: 127.0.0.1:9464
  salt_secret_file: $TMP/salt.key
  steer_fail_open: $1
${FG_E2E_WORKERS:+  workers: $FG_E2E_WORKERS}
EOF
}
policy true >"$TMP/open.yaml"
policy false >"$TMP/closed.yaml"
"$CTLBIN" policy check "$TMP/open.yaml" >/dev/null || { tap_fail "policy check" "$("$CTLBIN" policy check "$TMP/open.yaml" 2>&1)"; exit 1; }
sed 's/steer_fail_open: true/steer_fail_open: maybe/' "$TMP/open.yaml" >"$TMP/bad1.yaml"
out=$("$CTLBIN" policy check "$TMP/bad1.yaml" 2>&1); rc=$?
check "policy: steer_fail_open takes true | false (rc $rc)" \
	bash -c "[ $rc = 2 ] && grep -q 'agent.steer_fail_open must be true | false' <<<'$out'"
sed 's/^  mode: transparent/  mode: transparent\n  listen: 0.0.0.0:8000/' "$TMP/open.yaml" >"$TMP/bad2.yaml"
out=$("$CTLBIN" policy check "$TMP/bad2.yaml" 2>&1); rc=$?
check "policy: transparent mode refuses agent.listen on the protected port (rc $rc)" \
	bash -c "[ $rc = 2 ] && grep -q 'the engine listens on the protected port 8000' <<<'$out'"

spawn "$TMP/sim.log" ip netns exec "$NSN" "$FG_BUILD/fairgate-sim" --policy "$TMP/open.yaml" \
	--listen 0.0.0.0:8000 --speedup 0 --enable-prompt-tokens-details --log-requests
wait_port "$NSN" 127.0.0.1 8000 10 || { tap_fail "fairgate-sim starts" "$(tail -3 "$TMP/sim.log")"; exit 1; }

AGENT="" RUN=0
start_agent() { # POLICY [ARGS...]
	local policy=$1; shift
	RUN=$((RUN + 1))
	nsenter --net=/run/netns/"$NSN" "$FG_BUILD/fairgated" --policy "$policy" --pin-dir "$PIN" \
		--ctl "$CTL" "$@" >"$TMP/agent.$RUN.log" 2>&1 &
	AGENT=$!
	on_exit "kill -TERM $AGENT 2>/dev/null; sleep 0.3; kill -KILL $AGENT 2>/dev/null"
	for _ in $(seq 150); do
		grep -q "fairgated: running" "$TMP/agent.$RUN.log" && return 0
		kill -0 "$AGENT" 2>/dev/null || break
		sleep 0.1
	done
	echo "# fairgated did not come up:"; sed 's/^/#   /' "$TMP/agent.$RUN.log"
	return 1
}
# stop_agent — SIGTERM; one TAP line: exit 0, no sanitizer report.
stop_agent() {
	local rc=0
	kill -TERM "$AGENT" 2>/dev/null
	wait "$AGENT" 2>/dev/null || rc=$?
	if [ $rc -eq 0 ] && ! grep -qE 'Sanitizer|runtime error' "$TMP/agent.$RUN.log"; then
		tap_ok "fairgated (run $RUN) exits cleanly"
	else
		tap_fail "fairgated (run $RUN) exits cleanly" "rc=$rc $(grep -m3 -E 'Sanitizer|SUMMARY|runtime error' "$TMP/agent.$RUN.log" | tr '\n' ' ')"
	fi
}

# who SRC [HOST] — who answers an unauthenticated GET on HOST:8000: the
# agent (401 in OpenAI's shape), the engine (200), or nobody (refused).
who() {
	local host=${2:-$NODE_B} code rc
	[[ $host == *:* ]] && host="[$host]"
	code=$(ip netns exec "$NSC" curl -s -o /dev/null -w '%{http_code}' --interface "$1" \
		--connect-timeout 3 --max-time 5 "http://$host:8000/v1/models")
	rc=$?
	case "$rc:$code" in
	0:401) echo agent ;;
	0:200) echo engine ;;
	7:*) echo refused ;;
	*) echo "other:$rc:$code" ;;
	esac
}
# chat SRC KEY BODY [CURL ARGS] — a chat completion from SRC through node:8000.
chat() {
	local src=$1 key=$2 body=$3 host=$NODE_B; shift 3
	[[ $src == $ACME_A || $src == $GLOBEX_A ]] && host=$NODE_A
	ip netns exec "$NSC" curl -sS --max-time 20 --interface "$src" "http://$host:8000/v1/chat/completions" \
		-H "Authorization: Bearer $key" -H 'Content-Type: application/json' -d "$body" "$@"
}
# node_stat FIELD — a node counter summed over CPUs (bpftool, by name).
node_stat() {
	bpftool -j map dump pinned "$PIN/node_stats" |
		jq "[.. | objects | .\"$1\"? // empty | numbers] | add // 0"
}
tenant_stat() { "$CTLBIN" tenant show "$1" --json | jq "[.. | objects | .\"$2\"? // empty | numbers] | add // 0"; }
sim_metric() { ip netns exec "$NSN" curl -s --max-time 5 http://$NODE_A:8000/metrics | awk -v m="$1" 'index($1, m) == 1 { s += $2 } END { print s + 0 }'; }

KEY_ACME=sk-acme-demo KEY_GLOBEX=sk-globex-demo

expect_eq "before fairgated: clients reach the engine on port 8000" "$(who $ACME_B)" engine

# ---- transparent mode, fail-open ----
start_agent "$TMP/open.yaml" || exit 1
check "steer attached, fail-open" grep -q "steer attached.*fail-open" "$TMP/agent.1.log"
APORT=$(sed -nE 's/.*proxy on \[::\]:([0-9]+) \(transparent mode\).*/\1/p' "$TMP/agent.1.log")
check "the agent listens on a port of its own choosing (${APORT:-none})" test -n "$APORT"
expect_eq "fairgatectl status names that port, not the policy's" "$("$CTLBIN" status --json | jq -r .listen)" "[::]:${APORT:-none}"
expect_eq "a client's connection to node:8000 reaches the agent" "$(who $ACME_B)" agent
expect_eq "over the gated interface too" "$(who $GLOBEX_A $NODE_A)" agent
expect_eq "over IPv6 (the engine has no IPv6 socket at all)" "$(who $ACME_B6 $NODE_B6)" agent
expect_eq "dialling agent.engine's address from outside is steered too" "$(who $ACME_A $NODE_A)" agent
r=$(ip netns exec "$NSC" curl -s -o /dev/null -w '%{http_code}' --connect-timeout 3 http://$NODE_B:${APORT:-1}/v1/models; echo " rc=$?")
expect_eq "the agent's own port cannot be dialled from outside (around steer and gate)" "$r" "000 rc=7"
r=$(ip netns exec "$NSN" curl -s -o /dev/null -w '%{http_code}' --connect-timeout 3 http://127.0.0.1:${APORT:-1}/v1/models)
expect_eq "... but from the node itself" "$r" 401

# cache_salt: acme's second identical prompt hits acme's own (salted) cache;
# globex's and an unsalted direct request of the same text do not.
prompt=$(printf 'Transparent %d: a long system prompt that fills several KV blocks of the simulator. ' $(seq 1 12))
body() { printf '{"messages":[{"role":"system","content":"%s"},{"role":"user","content":"hi"}],"max_tokens":4%s}' "$prompt" "${1:-}"; }
cached() { jq -r '.usage.prompt_tokens_details.cached_tokens // "none"'; }
exempt0=$(node_stat steer_exempt) sim0=$(sim_metric 'vllm:request_success_total')
expect_eq "acme, first time: 200, nothing cached" "$(chat $ACME_B $KEY_ACME "$(body)" | cached)" 0
c=$(chat $ACME_B $KEY_ACME "$(body)" | cached)
check "acme, second time: its own prefix is cached ($c tokens)" test "$c" -gt 0 2>/dev/null
expect_eq "globex, same prompt: no hit (another salt)" "$(chat $GLOBEX_B $KEY_GLOBEX "$(body)" | cached)" 0
exempt1=$(node_stat steer_exempt)
direct=$(ip netns exec "$NSN" curl -sS --max-time 20 "http://$NODE_A:8000/v1/chat/completions" \
	-H 'Content-Type: application/json' -d "$(body)" | cached)
expect_eq "the same prompt straight to the engine (unsalted): no hit, so acme's was salted" "$direct" 0
expect_eq "the engine served each request once (no loop)" \
	"$(($(sim_metric 'vllm:request_success_total') - sim0))" 4
check "the agent's upstream connections were exempt from steering ($exempt1 > $exempt0)" \
	test "$exempt1" -gt "$exempt0"

# Streaming through the steered connection.
out=$(chat $GLOBEX_B $KEY_GLOBEX "$(body ',"stream":true')" -N)
check "streaming: several SSE chunks ($(grep -c '^data: {' <<<"$out"))" test "$(grep -c '^data: {' <<<"$out")" -ge 3
expect_eq "streaming: ends with [DONE]" "$(grep '^data: ' <<<"$out" | tail -1)" "data: [DONE]"
check "streaming: the usage chunk the agent forced is hidden" bash -c "! grep -q '\"usage\"' <<<'$out'"

# Shed: globex in a shed window, allowance 0.2/s (burst 1).
"$CTLBIN" tenant deny globex --mode shed --for 5m >/dev/null
expect_eq "shed: the allowance lets globex's first SYN through gate to the agent" \
	"$(who $GLOBEX_A $NODE_A)" agent
expect_eq "... charged once (gate), not again by steer" "$(tenant_stat globex allowance_used)" 1
expect_eq "shed: globex over the ungated interface is refused by steer (SK_DROP)" "$(who $GLOBEX_B)" refused
expect_eq "... counted as a steer refusal" "$(tenant_stat globex steer_refused)" 1
expect_eq "shed: globex over the gated interface is refused by gate" "$(who $GLOBEX_A $NODE_A)" refused
check "... by gate's RST ($(tenant_stat globex syn_shed) sheds), steer untouched" \
	test "$(tenant_stat globex syn_shed)" -ge 1 -a "$(tenant_stat globex steer_refused)" -eq 1
expect_eq "shed: acme is untouched" "$(who $ACME_B)" agent
"$CTLBIN" tenant allow globex >/dev/null
expect_eq "allow: globex reaches the agent again" "$(who $GLOBEX_B)" agent

# Metering: acme (100 units/s, 30 s burst) under a closed loop through steer.
load=$(ip netns exec "$NSC" "$FG_BUILD/fg-load" --target $NODE_B:8000 \
	--tenant "acme:$KEY_ACME:0:200:16:stream" --closed --connections 4 --requests 60 --timeout 20 2>/dev/null)
ok=$(jq '.tenants[0].status["200"] // 0' <<<"$load") limited=$(jq '.tenants[0].status["429"] // 0' <<<"$load")
check "metered: acme is served within its burst ($ok x 200) and then gets 429 ($limited x 429)" \
	test "$ok" -ge 3 -a "$limited" -ge 10 -a $((ok + limited)) -eq 60
check "... with a Retry-After" test "$(jq '.tenants[0].retry_after_seen' <<<"$load")" -ge 1
check "... streams of the admitted requests carried tokens" test "$(jq '.tenants[0].tokens_received' <<<"$load")" -gt 0
if [ "${FG_E2E_WORKERS:-1}" -gt 1 ]; then
	# steer assigns worker 0's listener; the kernel then picks a member of
	# its SO_REUSEPORT group, so every worker gets steered connections
	for w in $(seq 0 $((FG_E2E_WORKERS - 1))); do
		n=$(ip netns exec "$NSN" curl -s --max-time 5 http://127.0.0.1:9464/metrics |
			awk -v m="fairgate_worker_connections_total{worker=\"$w\"}" '$1 == m { print $2 }')
		check "workers: steered connections reached worker $w too (${n:-none})" test "${n:-0}" -gt 0
	done
fi

stop_agent
expect_eq "fairgated stopped: clients reach the engine directly (fail-open)" "$(who $ACME_B)" engine
expect_eq "... over the gated interface too" "$(who $GLOBEX_A $NODE_A)" engine
check "no steer link left pinned" test ! -e "$PIN/steer_link"

start_agent "$TMP/open.yaml" || exit 1
expect_eq "fairgated restarted: connections are steered again" "$(who $GLOBEX_B)" agent
stop_agent

# ---- agent.steer_fail_open: false ----
start_agent "$TMP/closed.yaml" || exit 1
check "steer attached, fail-closed" grep -q "steer attached.*fail-closed" "$TMP/agent.$RUN.log"
expect_eq "fail-closed: steered while the agent runs" "$(who $GLOBEX_B)" agent
check "fail-closed: the steer link is pinned" test -e "$PIN/steer_link"
stop_agent
expect_eq "fail-closed, fairgated stopped: clients are refused" "$(who $GLOBEX_B)" refused
expect_eq "... over IPv6 too" "$(who $ACME_B6 $NODE_B6)" refused
code=$(ip netns exec "$NSN" curl -s -o /dev/null -w '%{http_code}' --max-time 5 http://$NODE_A:8000/v1/models)
expect_eq "... while the node's own path to agent.engine still reaches the engine" "$code" 200
start_agent "$TMP/closed.yaml" || exit 1
check "a restarted fairgated takes over the pinned link" grep -q "steer attached" "$TMP/agent.$RUN.log"
expect_eq "... and steers again" "$(who $GLOBEX_B)" agent
"$CTLBIN" policy apply "$TMP/open.yaml" >/dev/null
check "reload to steer_fail_open: true unpins the link" test ! -e "$PIN/steer_link"
stop_agent
expect_eq "... so stopping fairgated now fails open" "$(who $GLOBEX_B)" engine

start_agent "$TMP/closed.yaml" --cleanup || exit 1
expect_eq "fail-closed with --cleanup: steered" "$(who $GLOBEX_B)" agent
stop_agent
expect_eq "--cleanup removes the link: clients reach the engine" "$(who $GLOBEX_B)" engine
check "... and the pins" test ! -e "$PIN/steer_link" -a ! -e "$PIN/node"
check "fairgate-sim saw no malformed request" bash -c "! grep -qiE 'error|sanitizer' '$TMP/sim.log'"
exit 0
