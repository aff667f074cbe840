#!/usr/bin/env bash
# harden_engine_auth.sh — issue #15 case 3: tenants' keys never reach the
# engine. A recording engine (fg-fake-engine --auth-log) shows what
# Authorization each request it got carried: none of a tenant's. With
# agent.engine_api_key_file, the engine (fairgate-sim --api-key, vLLM's
# flag) gets the engine's key and serves, while a tenant's key sent to it
# directly is refused; the agent's own calls (/metrics scrape, /tokenize)
# carry the same key, a rotated key file takes effect on `policy apply`,
# Cookie and Proxy-Authorization are not forwarded either,
# and a key file the agent cannot use refuses the apply and changes nothing.
source "$(dirname "$0")/harden_env.inc"

px_netns hdauth 152
px_policy
spawn "$PX_TMP/fake.log" ip netns exec "$PX_SNS" "$FG_BUILD/fg-fake-engine" \
	--listen 127.0.0.1:8001 --auth-log "$PX_TMP/auth.log"
fake=$SPAWNED_PID
wait_port "$PX_SNS" 127.0.0.1 8001 10 || { tap_fail "fg-fake-engine starts"; exit 1; }
px_start_agent
r=$(chat $PX_KEY_A '{"messages":[{"role":"user","content":"hello"}],"max_tokens":4}' -o /dev/null -w '%{http_code}')
expect_eq "alpha is served through the agent" "$r" 200
r=$(chat $PX_KEY_B '{"messages":[{"role":"user","content":"hello"}],"max_tokens":4,"stream":true}' -o /dev/null -w '%{http_code}')
expect_eq "beta is served (streamed)" "$r" 200
r=$(chat $PX_KEY_A '{"messages":[{"role":"user","content":"hello"}],"max_tokens":4}' -H "Cookie: session=$PX_KEY_A" \
	-H "Proxy-Authorization: Bearer $PX_KEY_A" -o /dev/null -w '%{http_code}')
expect_eq "alpha is served with a Cookie and a Proxy-Authorization" "$r" 200
check "no Cookie reached the engine" bash -c "! grep -q '+cookie' '$PX_TMP/auth.log'"
check "the engine saw the requests" grep -q 'POST /v1/chat/completions' "$PX_TMP/auth.log"
leaked=$(grep -cE "$PX_KEY_A|$PX_KEY_B" "$PX_TMP/auth.log")
check "no tenant key reached the engine ($leaked of $(wc -l <"$PX_TMP/auth.log") requests carried one)" test "$leaked" -eq 0
check "without engine_api_key_file, requests reach the engine with no Authorization at all" \
	bash -c "! grep -v ' -\$' '$PX_TMP/auth.log' | grep -q ."
echo "# engine saw: $(sort "$PX_TMP/auth.log" | uniq -c | tr -s ' ' | tr '\n' '|')"
px_stop_agent_clean

# with an engine key: the agent's own calls carry it too, and a reload rotates it
printf 'sk-engine-only\n' >"$PX_TMP/engine.key"
chmod 600 "$PX_TMP/engine.key"
px_policy "  engine_api_key_file: $PX_TMP/engine.key"
: >"$PX_TMP/auth.log"
px_start_agent
# 40,000 characters could be more tokens than max_context: counted by /tokenize first
text=$(yes 'the quick brown fox jumps over a lazy dog' | head -c 40000 | tr '\n' ' ')
r=$(chat $PX_KEY_A "{\"messages\":[{\"role\":\"user\",\"content\":\"$text\"}],\"max_tokens\":4}" -o /dev/null -w '%{http_code}')
expect_eq "a long prompt is served" "$r" 200
for _ in $(seq 30); do grep -q '^GET /metrics' "$PX_TMP/auth.log" && break; sleep 0.1; done
check "the agent asked /tokenize" grep -q '^POST /tokenize ' "$PX_TMP/auth.log"
check "the agent scraped /metrics" grep -q '^GET /metrics ' "$PX_TMP/auth.log"
check "every call the engine got carried the engine's key (requests, /tokenize, /metrics)" \
	bash -c "! grep -v ' Bearer sk-engine-only\$' '$PX_TMP/auth.log' | grep -q ."
printf 'sk-engine-rotated\n' >"$PX_TMP/engine.key"
pctl policy apply "$PX_TMP/policy.yaml" >"$PX_TMP/apply.out" 2>&1
: >"$PX_TMP/auth.log"
chat $PX_KEY_B '{"messages":[{"role":"user","content":"hello"}],"max_tokens":4}' -o /dev/null
check "after policy apply, the rotated key is sent" grep -q '^POST /v1/chat/completions Bearer sk-engine-rotated$' "$PX_TMP/auth.log"
printf 'two words\n' >"$PX_TMP/engine.key"
check "a key with a blank in it refuses the apply" bash -c "! '$FG_BUILD/fairgatectl' policy apply '$PX_TMP/policy.yaml' --ctl '$PX_TMP/ctl.sock' >'$PX_TMP/apply.out' 2>&1"
check "  saying why" grep -q 'engine_api_key_file.*visible ASCII' "$PX_TMP/apply.out"
: >"$PX_TMP/auth.log"
chat $PX_KEY_B '{"messages":[{"role":"user","content":"hello"}],"max_tokens":4}' -o /dev/null
check "  and the key in use stays" grep -q '^POST /v1/chat/completions Bearer sk-engine-rotated$' "$PX_TMP/auth.log"
px_stop_agent_clean
kill -TERM "$fake"; wait "$fake" 2>/dev/null
rm -f "$PX_TMP/engine.key"
spawn "$PX_TMP/agent-nokey.log" nsenter --net=/run/netns/"$PX_SNS" "$FG_BUILD/fairgated" \
	--policy "$PX_TMP/policy.yaml" --ctl "$PX_TMP/ctl.sock" --no-bpf
nokey=$SPAWNED_PID
for _ in $(seq 50); do alive "$nokey" || break; sleep 0.1; done
check "a missing engine key file stops the agent at start" bash -c "! kill -0 $nokey 2>/dev/null"
check "  saying why" grep -q 'engine_api_key_file.*No such file' "$PX_TMP/agent-nokey.log"

# the engine takes a key of its own
printf 'sk-engine-only\n' >"$PX_TMP/engine.key"
chmod 600 "$PX_TMP/engine.key"
px_policy "  engine_api_key_file: $PX_TMP/engine.key"
px_start_sim --speedup 0 --api-key sk-engine-only
r=$(sim_direct http://127.0.0.1:8001/v1/chat/completions -H "Authorization: Bearer $PX_KEY_A" \
	-H 'Content-Type: application/json' -d '{"messages":[{"role":"user","content":"x"}],"max_tokens":2}' -o /dev/null -w '%{http_code}')
expect_eq "the engine refuses a tenant's key sent to it directly" "$r" 401
px_start_agent
r=$(chat $PX_KEY_A '{"messages":[{"role":"user","content":"hello"}],"max_tokens":4}' -o "$PX_TMP/keyed.json" -w '%{http_code}')
expect_eq "through the agent the engine gets its own key and serves alpha" "$r" 200
[ "$r" = 200 ] || echo "# answer: $(head -c 300 "$PX_TMP/keyed.json")"
check "no reservation left behind" no_leaked_reservations
px_stop_agent_clean
