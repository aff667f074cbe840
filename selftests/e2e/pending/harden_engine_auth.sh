#!/usr/bin/env bash
# harden_engine_auth.sh — issue #15 case 3: tenants' keys never reach the
# engine. A recording engine (fg-fake-engine --auth-log) shows what
# Authorization each request it got carried: none of a tenant's. With
# agent.engine_api_key_file, the engine (fairgate-sim --api-key, vLLM's
# flag) gets the engine's key and serves, while a tenant's key sent to it
# directly is refused.
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
check "the engine saw the requests" grep -q 'POST /v1/chat/completions' "$PX_TMP/auth.log"
leaked=$(grep -cE "$PX_KEY_A|$PX_KEY_B" "$PX_TMP/auth.log")
check "no tenant key reached the engine ($leaked of $(wc -l <"$PX_TMP/auth.log") requests carried one)" test "$leaked" -eq 0
check "without engine_api_key_file, requests reach the engine with no Authorization at all" \
	bash -c "! grep -v ' -\$' '$PX_TMP/auth.log' | grep -q ."
echo "# engine saw: $(sort "$PX_TMP/auth.log" | uniq -c | tr -s ' ' | tr '\n' '|')"
px_stop_agent_clean
kill -TERM "$fake"; wait "$fake" 2>/dev/null

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
