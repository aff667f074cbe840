#!/usr/bin/env bash
# proxy_failures.sh — bad input and failures get clean answers and leak no
# reservation: malformed HTTP and JSON, oversized bodies (declared and
# chunked), slow clients (headers, body, idle keep-alive), an engine that is
# down, hangs, or crashes mid-stream, and a client that leaves mid-stream.
source "$(dirname "$0")/proxy_env.inc"

px_netns fail 14
px_policy "  timeouts: {header_s: 1, body_s: 1, idle_s: 2, upstream_s: 2}"
px_start_sim --speedup 1
px_start_agent

# raw TCP from the client namespace: send $2, read what comes back for $3 s
raw() {
	ip netns exec "$PX_CNS" timeout "$(( ${3:-2} + 3 ))" bash -c '
		exec 3<>/dev/tcp/'"$PX_SRV"'/8000 || exit 1
		printf "%b" "$1" >&3
		timeout "$2" cat <&3' _ "$1" "${3:-2}"
}
status_of() { head -1 | awk '{ print $2 }'; }

expect_eq "malformed request line: 400" "$(raw 'GARBAGE / NOPE\r\n\r\n' | status_of)" 400
expect_eq "bad header syntax: 400" "$(raw 'GET / HTTP/1.1\r\nHo st x\r\n\r\n' | status_of)" 400
# pipelined in one write: a plain request (the fast head reader), a chunked
# one (http_parser) and a plain one again, answered in order
body='{"messages":[{"role":"user","content":"pipelined"}],"max_tokens":2}'
req="POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer $PX_KEY_A\r\n"
out=$(raw "${req}Content-Length: ${#body}\r\n\r\n$body${req}Transfer-Encoding: chunked\r\n\r\n$(printf %x ${#body})\r\n$body\r\n0\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\n\r\n" 2)
expect_eq "pipelined plain, chunked, plain: three answers in order" \
	"$(grep -ao 'HTTP/1.1 [0-9]*' <<<"$out" | awk '{ printf "%s ", $2 }')$(grep -ao '"object":"chat.completion"' <<<"$out" | wc -l)" "200 200 200 2"
r=$(chat $PX_KEY_A '{"messages":[{"role":"user","content":"x"}' -w '\n%{http_code}')
expect_eq "malformed JSON: 400" "$(tail -1 <<<"$r")" 400
expect_eq "malformed JSON: OpenAI error shape" "$(head -1 <<<"$r" | jq -r .error.type)" invalid_request_error
r=$(chat $PX_KEY_A '{"messages":[{"role":"user","content":"x"}],"max_tokens":"lots"}')
expect_eq "wrong parameter type: names the parameter" "$(jq -r .error.param <<<"$r")" max_tokens
expect_eq "bad requests counted for the tenant" "$(tenant_field alpha outcomes.bad_request)" 2

head -c $((9 << 20)) /dev/zero | tr '\0' a >"$PX_TMP/big"
r=$(pc "$PX_URL/v1/chat/completions" -H "Authorization: Bearer $PX_KEY_A" --data-binary @"$PX_TMP/big" \
	-o "$PX_TMP/b413" -w '%{http_code}')
expect_eq "9 MiB body (Content-Length): 413" "$r" 413
expect_eq "413: OpenAI error shape" "$(jq -r .error.code "$PX_TMP/b413")" request_too_large
r=$(pc "$PX_URL/v1/chat/completions" -H "Authorization: Bearer $PX_KEY_A" -H 'Transfer-Encoding: chunked' \
	--data-binary @"$PX_TMP/big" -o /dev/null -w '%{http_code}')
expect_eq "9 MiB body (chunked): 413" "$r" 413

expect_eq "slow headers: 408 after header_s" \
	"$(raw 'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n' 3 | status_of)" 408
expect_eq "slow body: 408 after body_s" \
	"$(raw "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer $PX_KEY_A\r\nContent-Length: 100\r\n\r\n{\"mess" 3 | status_of)" 408
t0=$SECONDS
out=$(raw '' 5 | wc -c)
expect_eq "idle connection closed quietly after idle_s" "$out/$(( SECONDS - t0 < 5 ))" "0/1"

# engine hangs: 504 after upstream_s, refunded
kill -STOP "$PX_SIM_PID"
r=$(chat $PX_KEY_A '{"messages":[{"role":"user","content":"hang"}],"max_tokens":5}' -o "$PX_TMP/b504" -w '%{http_code}')
kill -CONT "$PX_SIM_PID"
expect_eq "engine silent past upstream_s: 504" "$r" 504
expect_eq "504: OpenAI error shape" "$(jq -r .error.code "$PX_TMP/b504")" engine_timeout

# client leaves mid-stream: billed what it received, nothing left reserved
long='{"messages":[{"role":"user","content":"write a long story"}],"max_tokens":3000,"stream":true}'
PX_CURL_TIMEOUT=1 chat $PX_KEY_B "$long" >"$PX_TMP/cut" 2>/dev/null
got=$(grep -c '^data: {' "$PX_TMP/cut")
sleep 0.3
expect_eq "client gone mid-stream: counted" "$(tenant_field beta outcomes.client_gone)" 1
billed=$(metric 'fairgate_tenant_units_total{tenant="beta"}')
# at least the delivered tokens' decode steps from an empty prompt (the real
# prompt only adds), at most half of what 3000 would have cost
least=$(px_price 0 $((got - 1))) reserved=$(px_price 0 3000)
check "client gone: billed for $got delivered chunks, not the 3000 reserved ($billed units, > $least, < $reserved / 2)" \
	awk -v b="$billed" -v l="$least" -v r="$reserved" 'BEGIN { exit !(b > l && b < r / 2) }'
check "client gone: reservation released" no_leaked_reservations

# engine crashes mid-stream: truncated stream, full refund
chat $PX_KEY_C "$long" >"$PX_TMP/crash" 2>/dev/null &
cpid=$!
sleep 1
kill -KILL "$PX_SIM_PID"
wait "$PX_SIM_PID" 2>/dev/null
crc=0
wait $cpid || crc=$?
check "engine crash mid-stream: client sees a truncated stream (curl rc $crc, no [DONE])" \
	bash -c "[ $crc -ne 0 ] && grep -q '^data: {' $PX_TMP/crash && ! grep -q 'DONE' $PX_TMP/crash"
expect_eq "engine crash: counted as engine_error" "$(tenant_field gamma outcomes.engine_error)" 1
expect_eq "engine crash: refunded in full (nothing billed)" \
	"$(metric 'fairgate_tenant_units_total{tenant="gamma"}')" 0
check "engine crash: reservation released" no_leaked_reservations

# engine down: 503, refunded
r=$(chat $PX_KEY_C '{"messages":[{"role":"user","content":"x"}],"max_tokens":5}' -o "$PX_TMP/b503" -w '%{http_code}')
expect_eq "engine down: 503" "$r" 503
expect_eq "503: OpenAI error shape" "$(jq -r .error.type "$PX_TMP/b503")" server_error
px_start_sim --speedup 0
r=$(chat $PX_KEY_C '{"messages":[{"role":"user","content":"x"}],"max_tokens":5}' -o /dev/null -w '%{http_code}')
expect_eq "engine back: 200 again" "$r" 200
check "no reservation left behind" no_leaked_reservations
px_stop_agent_clean
