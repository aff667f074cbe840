#!/usr/bin/env bash
# meter_routes.sh — deny by default, seen from a client and from the
# engine: only the endpoints fairgated prices (and the read-only ones, and
# the policy's agent.passthrough entries at their price) reach the engine;
# everything else is answered 404/405/400 in OpenAI's shape and never
# appears in the engine's request log. Passthrough bodies get the salt and
# priority rules; the engine is told the output cap that was reserved and an
# engine that generates past it is billed within the reservation.
# Engine: fg-fake-engine, which logs every request it receives.
source "$(dirname "$0")/meter_env.inc"

px_netns mroutes 31
mt_policy "" "" "  engine_scheduling: priority
  passthrough:
    - {path: '/v1/audio/*', methods: [POST], units: 100}
    - {path: /v1/audio/public, methods: [POST], units: 0, auth: false}"
mt_start_fake --ignore-max-tokens 2000
px_start_agent
K="Authorization: Bearer $PX_KEY_A"

# request METHOD TARGET [BODY] — the status code, the body in $PX_TMP/r
request() {
	local args=(--path-as-is -X "$1" "$PX_URL$2" -H "$K" -o "$PX_TMP/r" -w "%{http_code}")
	[ $# -ge 3 ] && args+=(-H 'Content-Type: application/json' -d "$3")
	pc "${args[@]}"
}

chat='{"messages":[{"role":"user","content":"hello"}],"max_tokens":5}'
before=$(engine_requests)
# method  target  body  status  code
while IFS='|' read -r method target body status code; do
	[ -z "$method" ] && continue
	got=$(request "$method" "$target" $body)
	if [ "$got" = "$status" ] && [ "$(jq -r .error.code "$PX_TMP/r")" = "$code" ]; then
		tap_ok "$method $target: $status $code"
	else
		tap_fail "$method $target: $status $code" "got $got $(head -c 200 "$PX_TMP/r")"
	fi
done <<EOF
POST|/invocations|{}|404|not_found
POST|/v1/chat/completions/|$chat|404|not_found
POST|/V1/chat/completions|$chat|404|not_found
POST|/v1/responses/resp_1/cancel|{}|404|not_found
GET|/v1/chat/completions||405|method_not_allowed
DELETE|/v1/models||405|method_not_allowed
GET|/v1/audio/transcriptions||405|method_not_allowed
POST|/v1/chat%2Fcompletions|$chat|400|invalid_path
POST|/v1/%63hat/completions|$chat|400|invalid_path
POST|//v1/chat/completions|$chat|400|invalid_path
POST|/v1/./chat/completions|$chat|400|invalid_path
POST|/v1/audio/../chat/completions|$chat|400|invalid_path
EOF
expect_eq "nothing refused reached the engine" "$(engine_requests)" "$before"
r=$(pc -X GET "$PX_URL/v1/chat/completions" -H "$K" -D - -o /dev/null)
check "405 names what is allowed" grep -qi '^allow: POST' <<<"$r"
expect_eq "404s and 405s counted" \
	"$(metric 'fairgate_refused_paths_total{status="404"}')/$(metric 'fairgate_refused_paths_total{status="405"}')/$(metric 'fairgate_refused_paths_total{status="400"}')" \
	"4/4/5" # the table's, and the Allow check's 405
expect_eq "refusals cost nothing" "$(billed alpha)" 0

# an absolute-form target naming this server is its path; another is refused
code=$(pc --request-target "http://$PX_SRV:8000/v1/chat/completions" "$PX_URL/" -H "$K" \
	-d "$chat" -o /dev/null -w '%{http_code}')
expect_eq "absolute-form target naming this server: served" "$code" 200
code=$(pc --request-target "http://elsewhere.example/v1/chat/completions" "$PX_URL/" -H "$K" \
	-d "$chat" -o /dev/null -w '%{http_code}')
expect_eq "absolute-form target naming another host: 400" "$code" 400
expect_eq "the engine got the origin-form path" "$(engine_saw '^POST /v1/chat/completions ')" 1

# the read-only endpoints, unmetered (probes without a key)
expect_eq "GET /v1/models with a key" "$(request GET /v1/models)" 200
expect_eq "GET /v1/models without a key: 401" \
	"$(pc "$PX_URL/v1/models" -o /dev/null -w '%{http_code}')" 401
expect_eq "GET /health without a key" "$(pc "$PX_URL/health" -o /dev/null -w '%{http_code}')" 200
expect_eq "GET /version without a key" "$(pc "$PX_URL/version" -o /dev/null -w '%{http_code}')" 200

# agent.passthrough: priced per request, salt and priority rules applied
b0=$(billed alpha)
code=$(request POST /v1/audio/transcriptions '{"file":"x","cache_salt":"theirs","priority":-3}')
expect_eq "passthrough path: forwarded" "$code" 200
b1=$(billed alpha)
check "passthrough path: billed its 100 units ($b0 -> $b1)" near "$(awk -v a="$b0" -v b="$b1" 'BEGIN { print b - a }')" 100
line=$(grep '^POST /v1/audio/transcriptions ' "$PX_TMP/engine.log")
salt=$(sed 's/^[^{]*//' <<<"$line" | jq -r .cache_salt)
check "passthrough body: the tenant's salt replaced the client's ($salt)" \
	bash -c "[[ '$salt' == fg1-alpha-* ]]"
expect_eq "passthrough body: the tier's priority, not the client's" \
	"$(sed 's/^[^{]*//' <<<"$line" | jq -r .priority)" 0
expect_eq "passthrough without a key: 401" \
	"$(pc "$PX_URL/v1/audio/transcriptions" -d '{}' -o /dev/null -w '%{http_code}')" 401
code=$(pc "$PX_URL/v1/audio/public" -H 'Content-Type: application/json' \
	-d '{"cache_salt":"other-tenants-salt","x":1}' -o /dev/null -w '%{http_code}')
expect_eq "auth: false passthrough: served without a key" "$code" 200
line=$(grep '^POST /v1/audio/public ' "$PX_TMP/engine.log")
expect_eq "auth: false passthrough: no client salt reaches the engine" \
	"$(sed 's/^[^{]*//' <<<"$line" | jq -c .)" '{"x":1}'
# a keyless body gets no room reserved for its declared length: its buffer
# grows with what arrives (proxy_client.c, body_room), here 300,000 bytes
# sent after the head in 20 writes; the engine gets every byte, in order
{ printf '{"x":2,"pad":"'; head -c 299000 /dev/zero | tr '\0' 'p'; printf '"'; } >"$PX_TMP/pub.json"
printf '%*s}' $((300000 - $(stat -c %s "$PX_TMP/pub.json") - 1)) '' >>"$PX_TMP/pub.json"
out=$(ip netns exec "$PX_CNS" timeout 30 bash -c '
	exec 3<>/dev/tcp/'"$PX_SRV"'/8000 || exit 1
	printf "POST /v1/audio/public HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 300000\r\n\r\n" >&3
	for i in $(seq 0 19); do dd if="$1" bs=15000 skip=$i count=1 status=none >&3; sleep 0.05; done
	timeout 3 cat <&3' _ "$PX_TMP/pub.json")
expect_eq "auth: false passthrough, 300,000 bytes in 20 writes: 200" "$(head -1 <<<"$out" | awk '{ print $2 }')" 200
line=$(grep '^POST /v1/audio/public ' "$PX_TMP/engine.log" | tail -1)
check "  the engine got the body whole and in order" \
	cmp -s <(sed 's/^POST \/v1\/audio\/public //' <<<"$line" | jq -c .) <(jq -c . "$PX_TMP/pub.json")
code=$(pc "$PX_URL/v1/audio/transcriptions" -H "$K" -H 'Content-Type: audio/wav' \
	--data-binary 'RIFF....WAVEfmt ' -o /dev/null -w '%{http_code}')
expect_eq "passthrough body that is not JSON: forwarded as it is" "$code" 200
check "the engine got those bytes" grep -q 'RIFF....WAVEfmt' "$PX_TMP/engine.log"

# the engine is told the cap; an engine that generates past it (this one
# makes 2,000 tokens whatever it is told) is billed within the reservation
b0=$(billed alpha)
pc "$PX_URL/v1/chat/completions" -H "$K" -d '{"messages":[{"role":"user","content":"hi"}]}' \
	-o "$PX_TMP/nocap" -w '%{http_code}' >"$PX_TMP/c"
expect_eq "chat without max_tokens: 200" "$(cat "$PX_TMP/c")" 200
line=$(grep '^POST /v1/chat/completions ' "$PX_TMP/engine.log" | tail -1 | sed 's/^[^{]*//')
expect_eq "the engine was told the tier's default cap (max_tokens, max_completion_tokens)" \
	"$(jq -c '[.max_tokens, .max_completion_tokens]' <<<"$line")" "[64,64]"
expect_eq "the engine reported 2,000 tokens" "$(jq .usage.completion_tokens "$PX_TMP/nocap")" 2000
b1=$(billed alpha)
prompt=$(jq .usage.prompt_tokens "$PX_TMP/nocap")
want=$(units "$prompt" 0 64)
check "billed for 64 of them, the reservation ($b0 -> $b1, want +$want)" \
	near "$(awk -v a="$b0" -v b="$b1" 'BEGIN { print b - a }')" "$want"
pc "$PX_URL/v1/chat/completions" -H "$K" \
	-d '{"messages":[{"role":"user","content":"hi"}],"max_tokens":9000,"max_completion_tokens":7,"stream":true}' \
	-o "$PX_TMP/s" -w '%{http_code}' >"$PX_TMP/c"
line=$(grep '^POST /v1/chat/completions ' "$PX_TMP/engine.log" | tail -1 | sed 's/^[^{]*//')
expect_eq "stream: max_completion_tokens wins and both caps carry it" \
	"$(jq -c '[.max_tokens, .max_completion_tokens]' <<<"$line")" "[7,7]"
expect_eq "stream: usage forced, continuous" \
	"$(jq -c '.stream_options' <<<"$line")" '{"include_usage":true,"continuous_usage_stats":true}'
check "stream: no usage reached a client that did not ask" bash -c "! grep -q usage $PX_TMP/s"
check "no reservation left behind" no_leaked_reservations
px_stop_agent_clean
