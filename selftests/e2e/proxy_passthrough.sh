#!/usr/bin/env bash
# proxy_passthrough.sh — responses through fairgated are the engine's own,
# byte for byte (streaming and not), apart from the forced usage chunk that a
# client who did not ask never sees; identity: unknown/missing keys get 401
# in OpenAI's shape, the tenant header counts only from trusted proxies;
# /metrics and `fairgatectl status` report what happened.
source "$(dirname "$0")/proxy_env.inc"

px_netns pass 11
px_policy
px_start_sim --speedup 0 --seed 7
px_start_agent

prompt='{"model":"llama-3.3-70b","messages":[{"role":"user","content":"Summarise the tale of the tortoise and the hare in one line."}],"max_tokens":12'
norm() { sed -E 's/"created":[0-9]+/"created":0/g'; }

# Each comparison restarts the simulator so both paths see request #1 of a
# fresh engine (its text depends on the request sequence).
compare() { # NAME BODY [include the engine's x-sim comment]
	local name=$1 body=$2
	px_stop_sim; px_start_sim --speedup 0 --seed 7
	sim_direct http://127.0.0.1:8001/v1/chat/completions -H 'Content-Type: application/json' \
		-d "$body" | norm >"$PX_TMP/direct"
	px_stop_sim; px_start_sim --speedup 0 --seed 7
	chat $PX_KEY_A "$body" | norm >"$PX_TMP/proxied"
	if [ -s "$PX_TMP/direct" ] && cmp -s "$PX_TMP/direct" "$PX_TMP/proxied"; then
		tap_ok "$name: identical to the engine's response"
	else
		tap_fail "$name: identical to the engine's response" \
			"$(diff <(head -c 600 "$PX_TMP/direct") <(head -c 600 "$PX_TMP/proxied") | head -6 | tr '\n' ' ')"
	fi
}

compare "non-streaming" "$prompt}"
compare "streaming without include_usage" "$prompt,\"stream\":true}"
compare "streaming with include_usage" "$prompt,\"stream\":true,\"stream_options\":{\"include_usage\":true}}"
# null says nothing: fairgated forces {"include_usage":true} and hides the chunk
compare "streaming with stream_options: null" "$prompt,\"stream\":true,\"stream_options\":null}"

chat $PX_KEY_A "$prompt,\"stream\":true}" >"$PX_TMP/s1"
check "stream: forced usage chunk hidden from a client that did not ask" \
	bash -c "! grep -q '\"usage\":{' $PX_TMP/s1 && grep -q 'data: \[DONE\]' $PX_TMP/s1"
chat $PX_KEY_A "$prompt,\"stream\":true,\"stream_options\":{\"include_usage\":true}}" >"$PX_TMP/s2"
check "stream: usage chunk kept for a client that asked" grep -q '"choices":\[\],"usage":{' "$PX_TMP/s2"

# identity
r=$(chat sk-not-a-key "$prompt}" -w '\n%{http_code}')
expect_eq "unknown key: 401" "$(tail -1 <<<"$r")" 401
expect_eq "unknown key: OpenAI error shape" "$(head -1 <<<"$r" | jq -r '.error.code + "/" + .error.type')" \
	"invalid_api_key/invalid_request_error"
r=$(pc "$PX_URL/v1/chat/completions" -d "$prompt}" -o /dev/null -w '%{http_code}')
expect_eq "missing key: 401" "$r" 401
r=$(pc "$PX_URL/v1/chat/completions" -H 'x-fairgate-tenant: beta' -d "$prompt}" -o /dev/null -w '%{http_code}')
expect_eq "tenant header from an untrusted source: ignored (401)" "$r" 401
r=$(pc2 "$PX_URL/v1/chat/completions" -H 'x-fairgate-tenant: beta' -d "$prompt}" -o /dev/null -w '%{http_code}')
expect_eq "tenant header from a trusted proxy: accepted" "$r" 200
expect_eq "trusted proxy's request billed to the named tenant" "$(tenant_field beta admitted)" 1
r=$(pc2 "$PX_URL/v1/chat/completions" -H 'x-fairgate-tenant: nobody' -d "$prompt}" -o /dev/null -w '%{http_code}')
expect_eq "trusted proxy naming an unknown tenant: 401" "$r" 401
r=$(pc "$PX_URL/health" -o /dev/null -w '%{http_code}')
expect_eq "/health passes without a key" "$r" 200

# keep-alive on the client side: several requests, one connection
n=$(pc -w '%{num_connects}\n' -o /dev/null -o /dev/null -o /dev/null \
	-H "Authorization: Bearer $PX_KEY_A" -d "$prompt}" \
	"$PX_URL/v1/chat/completions" "$PX_URL/v1/chat/completions" "$PX_URL/v1/chat/completions" |
	paste -sd+ | bc)
expect_eq "client keep-alive: 3 requests on 1 connection" "$n" 1

# visibility
expect_eq "metrics: alpha's ok requests counted" \
	"$(metric 'fairgate_requests_total{tenant="alpha",outcome="ok"}')" 9
check "metrics: alpha billed units > 0" float_le 1 "$(metric 'fairgate_tenant_units_total{tenant="alpha"}')"
check "metrics: decision latency histogram filled" \
	float_le 9 "$(metric 'fairgate_decision_seconds_count')"
expect_eq "metrics: 401s counted" "$(metric fairgate_unauthenticated_total)" 4
expect_eq "metrics: no usage clamped (the simulator counts truthfully)" \
	"$(metric 'fairgate_tenant_usage_clamped_total{tenant="alpha"}')" 0
check "status: human form names the tenants" bash -c "'$FG_BUILD/fairgatectl' status --ctl '$PX_TMP/ctl.sock' | grep -q '^gamma '"
expect_eq "status: kernel enforcement reported off" "$(pctl status --json | jq -r .kernel_enforcement)" false
check "agent said once that kernel enforcement is off" \
	test "$(grep -c 'kernel enforcement off' "$PX_TMP/agent.log")" -eq 1
check "no reservation left behind" no_leaked_reservations
px_stop_agent_clean
