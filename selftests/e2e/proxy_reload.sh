#!/usr/bin/env bash
# proxy_reload.sh — `fairgatectl policy apply` under load: no request lost,
# no connection dropped, bucket levels of unchanged tenants kept, added and
# removed tenants take effect at once, and a bad or non-reloadable file
# changes nothing.
source "$(dirname "$0")/proxy_env.inc"

px_netns reload 15
PX_RATE_B=20 px_policy
cp "$PX_TMP/policy.yaml" "$PX_TMP/v1.yaml"
px_start_sim --speedup 0
px_start_agent

# beta spends its 200-unit bucket: 100 prompt + 57 output tokens = 100 + 56
# decode steps at ~128 tokens of context (1.66 units each) = 193 units
ids=$(seq -s, 1 100)
code=$(pc "$PX_URL/v1/completions" -H "Authorization: Bearer $PX_KEY_B" \
	-d "{\"prompt\":[$ids],\"max_tokens\":57}" -o /dev/null -w '%{http_code}')
expect_eq "beta spends its burst" "$code" 200

# v2: gamma removed, delta added, alpha's contract changed, beta unchanged
KEY_D=sk-test-delta
sed -e '/- name: gamma/,/cache: shared/d' "$PX_TMP/v1.yaml" >"$PX_TMP/v2.yaml"
sed -i "s/^agent:/  - name: delta\n    tier: standard\n    units_per_s: 5000\n    keys: [\"sha256:$(px_hash $KEY_D)\"]\nagent:/" "$PX_TMP/v2.yaml"
sed -i '0,/units_per_s: 100000/s//units_per_s: 150000/' "$PX_TMP/v2.yaml"
printf 'tenants:\n  - name: broken\n    tier: nope\n' >"$PX_TMP/bad.yaml"
sed 's/listen: 0.0.0.0:8000/listen: 0.0.0.0:8009/' "$PX_TMP/v2.yaml" >"$PX_TMP/moved.yaml"

# load: alpha and gamma keep ~150 req/s going across the reloads
ip netns exec "$PX_CNS" "$FG_BUILD/fg-load" --target "$PX_SRV:8000" --duration 4 --connections 4 \
	--tenant "alpha:$PX_KEY_A:100:200:8" --tenant "alpha-stream:$PX_KEY_A:50:200:8:stream" \
	>"$PX_TMP/load.json" 2>"$PX_TMP/load.err" &
lpid=$!
# and one keep-alive connection that must survive every reload: 15 requests
# at 5/s on it, counting the connections curl had to open
urls=() outs=()
for i in $(seq 1 15); do urls+=("$PX_URL/v1/chat/completions"); outs+=(-o /dev/null); done
pc --rate 5/s -w '%{num_connects} %{http_code}\n' "${outs[@]}" -H "Authorization: Bearer $PX_KEY_A" \
	-d '{"messages":[{"role":"user","content":"keep me"}],"max_tokens":4}' "${urls[@]}" >"$PX_TMP/ka.out" &
kpid=$!
sleep 1
pctl policy apply "$PX_TMP/bad.yaml" >/dev/null 2>"$PX_TMP/bad.err"; brc=$?
pctl policy apply "$PX_TMP/moved.yaml" >/dev/null 2>"$PX_TMP/moved.err"; mrc=$?
sleep 0.5
pctl policy apply "$PX_TMP/v2.yaml" >"$PX_TMP/apply.out" 2>&1; arc=$?
sleep 0.5
pctl policy apply "$PX_TMP/v1.yaml" >/dev/null 2>&1
sleep 0.5
pctl policy apply "$PX_TMP/v2.yaml" >/dev/null 2>&1
lrc=0
wait $lpid || lrc=$?
wait $kpid

expect_eq "bad file refused (exit 2)" "$brc" 2
check "bad file: the error names the file and line" grep -q "bad.yaml:[0-9]" "$PX_TMP/bad.err"
expect_eq "listener change refused by the agent (exit 1)" "$mrc" 1
check "listener change: says it needs a restart" grep -q "agent.listen.*restart" "$PX_TMP/moved.err"
expect_eq "good file applied" "$arc" 0
check "apply reports the change" grep -q "applied .*v2.yaml: 3 tenants (1 added, 1 removed)" "$PX_TMP/apply.out"
expect_eq "load generator: no transport error" "$lrc" 0
sent=$(jq '[.tenants[].sent] | add' "$PX_TMP/load.json")
ok=$(jq '[.tenants[].status["200"] // 0] | add' "$PX_TMP/load.json")
errs=$(jq '[.tenants[].errors[]] | add' "$PX_TMP/load.json")
check "load ran ($sent requests)" test "${sent:-0}" -gt 200
expect_eq "every request across four reloads answered 200" "$ok/$errs" "$sent/0"
expect_eq "a keep-alive connection spanning the reloads: 15 x 200 on 1 connection" \
	"$(awk '{ c += $1; if ($2 == 200) ok++ } END { print ok "/" c }' "$PX_TMP/ka.out")" "15/1"

r=$(pc "$PX_URL/v1/completions" -H "Authorization: Bearer $PX_KEY_B" \
	-d "{\"prompt\":[$ids],\"max_tokens\":57}" -o /dev/null -w '%{http_code}')
expect_eq "beta's spent bucket survived the reloads (still 429)" "$r" 429
expect_eq "alpha's new contract in force" "$(tenant_field alpha units_per_s)" 150000
r=$(chat $KEY_D '{"messages":[{"role":"user","content":"hi"}],"max_tokens":4}' -o /dev/null -w '%{http_code}')
expect_eq "added tenant admitted at once" "$r" 200
r=$(chat $PX_KEY_C '{"messages":[{"role":"user","content":"hi"}],"max_tokens":4}' -o /dev/null -w '%{http_code}')
expect_eq "removed tenant's key refused at once" "$r" 401
check "no reservation left behind" no_leaked_reservations
px_stop_agent_clean
