#!/usr/bin/env bash
# harden_soak.sh — issue #15's soak and fault test, bounded (~100 s).
# Three tenants load fairgated with fg-load for 68 s (alpha streamed, beta
# and gamma not) while a fault script, one fault at a time:
#    8 s  holds 20 slowloris connections (half a request line) and sends 8
#         keyless POSTs declaring 8 MiB that stall before their last byte
#   16 s  applies a good policy (gamma's rate) and a bad one (rejected)
#   24 s  SIGKILLs the engine, starts it again 2 s later
#   34 s  SIGKILLs fairgated, starts it again at once
#   44 s  SIGTERMs fairgated, starts it again
#   52 s  a slow reader (16 KiB/s, gamma's key) on a 16,000-token stream, for 8 s
#   60 s  SIGSTOPs the engine for 4 s (upstream_s is 3)
# At the end: every reservation, KV reservation, queued and in-flight count
# is zero; RSS and fds of the last fairgated are back near their baseline
# (taken after its start and a first request); beta, whose requests are
# either answered in full or refunded, is billed no more than the usage it
# received priced by the cost model (nor alpha more than its requests could
# cost); alpha's and beta's success rates stay above SOAK_FLOOR; no
# incarnation of fairgated reports a sanitizer error.
source "$(dirname "$0")/harden_env.inc"
hd_lean_asan
SOAK_FLOOR=${SOAK_FLOOR:-0.70}
LOAD_S=68

px_netns hdsoak 160
px_policy "  timeouts: {header_s: 5, body_s: 5, idle_s: 5, upstream_s: 3}"
cp "$PX_TMP/policy.yaml" "$PX_TMP/policy.good.yaml"
sed -i '/name: gamma/,/units_per_s/ s/units_per_s: .*/units_per_s: 90000/' "$PX_TMP/policy.good.yaml"
printf 'tiers: [oops\n' >"$PX_TMP/policy.bad.yaml"
px_start_sim --speedup 1
px_start_agent
base=(0 0 0)
billed=(0 0 0)   # alpha beta gamma, summed over fairgated's incarnations
units() { metric "fairgate_tenant_units_total{tenant=\"$1\"}"; }
# bank_base, after each start: what the incarnation reports before it bills
# anything (0, or what a restart carried over), so that bank counts only
# what this one billed, whether or not counters survive a restart
bank_base() { base=("$(units alpha)" "$(units beta)" "$(units gamma)"); }
bank() { # add what the running incarnation billed to billed[]
	local i=0 t v
	for t in alpha beta gamma; do
		v=$(units $t)
		billed[$i]=$(awk -v a="${billed[$i]}" -v b="${v:-0}" -v z="${base[$i]:-0}" 'BEGIN { print a + b - z }')
		i=$((i + 1))
	done
}
sanitizer_clean() { ! grep -qE 'AddressSanitizer|LeakSanitizer|runtime error' "$1"; }
agent_logs=()

spawn "$PX_TMP/load.json" ip netns exec "$PX_CNS" "$FG_BUILD/fg-load" --target "$PX_SRV:8000" \
	--tenant "alpha:$PX_KEY_A:4:400:32:stream" --tenant "beta:$PX_KEY_B:4:400:32" \
	--tenant "gamma:$PX_KEY_C:4:400:32" --connections 8 --duration $LOAD_S --drain 20 --timeout 20 --poisson
load=$SPAWNED_PID
t0=$SECONDS
at() { local w=$(( $1 - (SECONDS - t0) )); [ "$w" -gt 0 ] && sleep "$w"; echo "# $((SECONDS - t0)) s: $2"; }

at 8 "slowloris and stalled oversized keyless bodies"
hd_hold 20 'GET /v1/mod'
slowloris=$HD_HOLD_PID
spawn "$PX_TMP/attack.log" ip netns exec "$PX_CNS" bash -c '
	for ((i = 0; i < 8; i++)); do
		exec {fd}<>"/dev/tcp/$1/8000" || break
		printf "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 8388607\r\n\r\n" >&$fd
		timeout 3 head -c 8388606 /dev/zero >&$fd 2>/dev/null
	done
	echo sent
	while :; do sleep 1; done' _ "$PX_SRV"
attack=$SPAWNED_PID

at 16 "a good policy and a bad one"
pctl policy apply "$PX_TMP/policy.good.yaml" >/dev/null 2>&1; good=$?
pctl policy apply "$PX_TMP/policy.bad.yaml" >/dev/null 2>&1; bad=$?
expect_eq "the good policy applies, the bad one is refused (rc $good, $bad)" "$good/$((bad != 0))" 0/1
expect_eq "the bad policy changed nothing (gamma keeps the good one's rate)" "$(tenant_field gamma units_per_s | cut -d. -f1)" 90000
kill -TERM "$slowloris" "$attack" 2>/dev/null

at 24 "engine SIGKILL"
kill -KILL "$PX_SIM_PID"; wait "$PX_SIM_PID" 2>/dev/null
sleep 2
px_start_sim --speedup 1

at 34 "fairgated SIGKILL"
bank
kill -KILL "$PX_AGENT_PID"; wait "$PX_AGENT_PID" 2>/dev/null
agent_logs+=("$PX_TMP/agent.1.log"); mv "$PX_TMP/agent.log" "$PX_TMP/agent.1.log"
px_start_agent
bank_base

at 44 "fairgated SIGTERM"
bank
kill -TERM "$PX_AGENT_PID"; rc=0; wait "$PX_AGENT_PID" 2>/dev/null || rc=$?
expect_eq "fairgated exits 0 on SIGTERM under load" "$rc" 0
agent_logs+=("$PX_TMP/agent.2.log"); mv "$PX_TMP/agent.log" "$PX_TMP/agent.2.log"
px_start_agent
bank_base
r=$(chat $PX_KEY_A '{"messages":[{"role":"user","content":"warm"}],"max_tokens":4}' -o /dev/null -w '%{http_code}')
base_rss=$(rss_kb "$PX_AGENT_PID") base_fds=$(fd_count "$PX_AGENT_PID")
echo "# last fairgated: baseline RSS ${base_rss} kB, ${base_fds} fds (first request: $r)"

at 52 "a slow reader"
ip netns exec "$PX_CNS" sysctl -qw net.ipv4.tcp_rmem="4096 4096 4096"
body='{"messages":[{"role":"user","content":"a long story please"}],"max_tokens":16000,"stream":true}'
spawn "$PX_TMP/slow.log" ip netns exec "$PX_CNS" bash -c '
	exec 3<>"/dev/tcp/$1/8000" || exit 1
	printf "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" "$2" "${#3}" "$3" >&3
	while [ "$(dd bs=16384 count=1 iflag=fullblock <&3 2>/dev/null | wc -c)" -eq 16384 ]; do sleep 1; done
	while :; do sleep 1; done' _ "$PX_SRV" "$PX_KEY_C" "$body"
slow=$SPAWNED_PID

at 60 "engine SIGSTOP for 4 s; the slow reader leaves"
kill -TERM "$slow" 2>/dev/null
ip netns exec "$PX_CNS" sysctl -qw net.ipv4.tcp_rmem="4096 131072 6291456"
kill -STOP "$PX_SIM_PID"; sleep 4; kill -CONT "$PX_SIM_PID"

wait "$load"
echo "# load done at $((SECONDS - t0)) s"
sleep 3
pctl status --json >"$PX_TMP/end.json"
left=$(jq -r '[.tenants[] | select(.reserved_units > 0.001 or .inflight != 0 or .queued != 0 or .kv_reserved_tokens != 0) | "\(.name): reserved \(.reserved_units), in flight \(.inflight), queued \(.queued), KV \(.kv_reserved_tokens)"] | join("; ")' "$PX_TMP/end.json")
check "every reservation, KV reservation, queued and in-flight count is zero${left:+ ($left)}" test -z "$left"
rss=$(rss_kb "$PX_AGENT_PID") fds=$(fd_count "$PX_AGENT_PID")
check "RSS back near its baseline: ${rss} kB against ${base_rss} kB (at most +32 MiB)" test "$rss" -le $((base_rss + (32 << 10)))
# the engine connections the agent keeps for reuse (closed after 30 s idle) aside
pool=$(ip netns exec "$PX_SNS" ss -Htnp state established dst 127.0.0.1:8001 | grep -c "pid=$PX_AGENT_PID,")
clients=$(ip netns exec "$PX_SNS" ss -Htn state established sport = :8000 | wc -l)
check "fds back near their baseline: $fds, $pool of them idle engine connections, against $base_fds (at most +4)" \
	test $((fds - pool)) -le $((base_fds + 4))
expect_eq "no client connection left open" "$clients" 0
bank
jq -c '.tenants[] | {name, sent, completed, status, errors, prompt_tokens, completion_tokens, tokens_received}' "$PX_TMP/load.json" | sed 's/^/# /'
tj() { jq -r --arg t "$1" ".tenants[] | select(.name == \$t) | $2" "$PX_TMP/load.json"; }
for t in alpha beta; do
	ok=$(tj $t '.status["200"] // 0') sent=$(tj $t .sent)
	check "$t's success rate stays above $SOAK_FLOOR ($ok of $sent answered 200)" \
		awk -v o="$ok" -v s="$sent" -v f="$SOAK_FLOOR" 'BEGIN { exit !(s > 0 && o / s >= f) }'
done
# beta: every request answered in full (its usage) or refunded
n=$(tj beta '.status["200"] // 0') pt=$(tj beta .prompt_tokens) ct=$(tj beta .completion_tokens)
per=$(px_price "$(( pt / (n > 0 ? n : 1) ))" "$(( ct / (n > 0 ? n : 1) ))")
owed=$(awk -v n="$n" -v p="$per" 'BEGIN { printf "%.1f", n * p }')
check "beta billed ${billed[1]} units, no more than the usage it received: $n x $per = $owed (+1%)" \
	awk -v b="${billed[1]}" -v o="$owed" 'BEGIN { exit !(b <= o * 1.01 + 1) }'
na=$(tj alpha .sent) pa=$(tj alpha '.prompt_tokens / ((.status["200"] // 1))')
most=$(awk -v n="$na" -v p="$(px_price "${pa%.*}" 32)" 'BEGIN { printf "%.1f", n * p }')
check "alpha billed ${billed[0]} units, no more than its $na requests could cost ($most)" \
	awk -v b="${billed[0]}" -v m="$most" 'BEGIN { exit !(b <= m * 1.01 + 1) }'
for l in "${agent_logs[@]}"; do
	check "no sanitizer report from the incarnation in $(basename "$l")" sanitizer_clean "$l"
done
px_stop_agent_clean
