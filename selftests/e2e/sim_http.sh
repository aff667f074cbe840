#!/usr/bin/env bash
# sim_http.sh — fairgate-sim over real HTTP with curl: every endpoint,
# streaming and non-streaming usage agree, each validation error comes back
# OpenAI-shaped over the wire, malformed HTTP gets a 400, keep-alive and
# pipelining work, and a client that hangs up mid-stream is aborted (its KV
# freed), visible in /metrics.
source "$(dirname "$0")/sim_env.inc"

start_sim main --speedup inf --enable-prompt-tokens-details --scheduling-policy fcfs

# --- endpoints ---
expect_eq "GET /health is 200" "$(curl -s -o /dev/null -w '%{http_code}' "$URL/health")" 200
expect_eq "GET /v1/models lists the served model" \
	"$(curl -s "$URL/v1/models" | jq -r '.data[0].id + " " + (.data[0].max_model_len|tostring)')" \
	"llama-3.3-70b 131072"
expect_eq "unknown path is 404 OpenAI-shaped" \
	"$(curl -s -w ' %{http_code}' "$URL/nope" | sed 's/.*"type":"\([A-Za-z]*\)".*} /\1 /')" "NotFoundError 404"
expect_eq "GET on a POST route is 405" \
	"$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/chat/completions")" 405

# --- non-streaming chat: 37 bytes = 10 tokens + 4 + 3 framing = 17 prompt tokens ---
body='{"model":"llama-3.3-70b","messages":[{"role":"user","content":"Say hello to fairgate-sim, please now"}],"max_tokens":12}'
curl -s -D "$tmp/h1" -o "$tmp/b1" "$URL/v1/chat/completions" -H 'Content-Type: application/json' -d "$body"
expect_eq "chat: status" "$(head -1 "$tmp/h1" | tr -d '\r')" "HTTP/1.1 200 OK"
expect_eq "chat: usage follows the documented token rule" \
	"$(jq -c '[.usage.prompt_tokens, .usage.completion_tokens, .usage.total_tokens]' "$tmp/b1")" "[17,12,29]"
expect_eq "chat: 4 bytes of text per token" "$(jq -r '.choices[0].message.content | length' "$tmp/b1")" 48
expect_eq "chat: finish_reason length" "$(jq -r '.choices[0].finish_reason' "$tmp/b1")" length
check "chat: virtual timing headers present" grep -qi '^x-sim-ttft-ms: [0-9.]*' "$tmp/h1"
check "chat: x-sim-preemptions present" grep -qi '^x-sim-preemptions: 0' "$tmp/h1"

# --- the same request streamed: one chunk per token, usage equal ---
sbody=$(echo "$body" | jq -c '. + {stream:true, stream_options:{include_usage:true}}')
curl -s -N -D "$tmp/h2" -o "$tmp/s2" "$URL/v1/chat/completions" -d "$sbody"
check "stream: event-stream content type" grep -qi '^content-type: text/event-stream' "$tmp/h2"
expect_eq "stream: ends with data: [DONE]" "$(grep '^data: ' "$tmp/s2" | tail -1)" "data: [DONE]"
grep '^data: {' "$tmp/s2" | sed 's/^data: //' >"$tmp/s2.json"
expect_eq "stream: one content chunk per token" \
	"$(jq -r 'select(.choices[0].delta.content? // "" | length > 0) | 1' "$tmp/s2.json" | wc -l)" 12
expect_eq "stream: role chunk first" "$(head -1 "$tmp/s2.json" | jq -r '.choices[0].delta.role')" assistant
expect_eq "stream: usage chunk equals non-stream usage" \
	"$(jq -c 'select(.usage) | .usage | del(.prompt_tokens_details)' "$tmp/s2.json")" \
	"$(jq -c '.usage | del(.prompt_tokens_details)' "$tmp/b1")"
expect_eq "stream: text equals the non-stream text length" \
	"$(jq -j 'select(.choices[0].delta.content?) | .choices[0].delta.content' "$tmp/s2.json" | wc -c)" 48
check "stream: virtual timings in an SSE comment" grep -q '^: x-sim {"ttft_ms":' "$tmp/s2"
curl -s -N -o "$tmp/s3" "$URL/v1/chat/completions" -d "$(echo "$body" | jq -c '. + {stream:true}')"
expect_eq "stream without include_usage has no usage chunk" "$(grep -c '"usage"' "$tmp/s3")" 0

# --- completions: prompt string, batch of prompts, n ---
expect_eq "completions: 2 prompts x n=2 = 4 choices, prompt tokens summed" \
	"$(curl -s "$URL/v1/completions" -d '{"prompt":["abcdefgh","abcd"],"n":2,"max_tokens":3}' |
		jq -c '[(.choices|length), .usage.prompt_tokens, .usage.completion_tokens]')" "[4,3,12]"
expect_eq "completions: default max_tokens is 16" \
	"$(curl -s "$URL/v1/completions" -d '{"prompt":"hi"}' | jq '.usage.completion_tokens')" 16

# --- validation errors over the wire: status, type, param ---
err() { # NAME PATH BODY WANT_CODE WANT_PARAM
	local out
	out=$(curl -s -w '\n%{http_code}' "$URL$2" -d "$3")
	local code=${out##*$'\n'} json=${out%$'\n'*}
	local got
	got="$(echo "$json" | jq -r '[.error.type, (.error.param // "null"), (.error.code|tostring)] | join(" ")' 2>/dev/null) $code"
	local want_type=BadRequestError; [ "$4" = 404 ] && want_type=NotFoundError
	expect_eq "error: $1" "$got" "$want_type $5 $4 $4"
}
m='"messages":[{"role":"user","content":"x"}]'
err "malformed JSON" /v1/chat/completions '{"messages":[' 400 null
err "missing messages" /v1/chat/completions '{}' 400 messages
err "unknown model" /v1/chat/completions "{\"model\":\"gpt-9\",$m}" 404 model
err "cache_salt with /" /v1/chat/completions "{$m,\"cache_salt\":\"a/b\"}" 400 cache_salt
err "cache_salt with @" /v1/chat/completions "{$m,\"cache_salt\":\"a@b\"}" 400 cache_salt
err "cache_salt with backslash" /v1/chat/completions "{$m,\"cache_salt\":\"a\\\\b\"}" 400 cache_salt
err "cache_salt with NUL" /v1/chat/completions "{$m,\"cache_salt\":\"a\\u0000b\"}" 400 cache_salt
err "cache_salt empty" /v1/chat/completions "{$m,\"cache_salt\":\"\"}" 400 cache_salt
err "cache_salt of 129 chars" /v1/chat/completions "{$m,\"cache_salt\":\"$(printf 's%.0s' $(seq 129))\"}" 400 cache_salt
err "priority under fcfs" /v1/chat/completions "{$m,\"priority\":-1}" 400 priority
err "prompt + max_tokens over max-model-len" /v1/completions '{"prompt":[1,2,3],"max_tokens":131070}' 400 max_tokens
err "max_tokens 0" /v1/completions '{"prompt":"x","max_tokens":0}' 400 max_tokens
err "stream_options without stream" /v1/chat/completions "{$m,\"stream_options\":{\"include_usage\":true}}" 400 stream_options
expect_eq "priority 0 under fcfs is accepted" \
	"$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/chat/completions" -d "{$m,\"priority\":0,\"max_tokens\":1}")" 200

# --- malformed HTTP, keep-alive, pipelining ---
exec 3<>/dev/tcp/127.0.0.1/$PORT
printf 'THIS IS NOT HTTP\r\n\r\n' >&3
resp=$(timeout 5 cat <&3 | head -c 400)
exec 3<&-
check "malformed HTTP gets 400" grep -q '^HTTP/1.1 400' <<<"$resp"
check "and an OpenAI-shaped error" grep -q '"type":"BadRequestError"' <<<"$resp"

req='POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 38\r\n\r\n{"prompt":"pipelined!","max_tokens":2}'
exec 3<>/dev/tcp/127.0.0.1/$PORT
printf "$req$req"'GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n' >&3
resp=$(timeout 5 cat <&3)
exec 3<&-
expect_eq "pipelined requests on one connection are all answered in order" \
	"$(grep -a -o 'HTTP/1.1 200 OK' <<<"$resp" | wc -l)" 3
expect_eq "keep-alive: curl reuses one connection" \
	"$(curl -s -v "$URL/health" "$URL/health" "$URL/health" 2>&1 | grep -c 'Re-using existing connection')" 2
big=$(head -c 2000000 /dev/zero | tr '\0' 'a')
printf '{"prompt":"%s","max_tokens":1}' "$big" >"$tmp/big.json"
expect_eq "a 2 MB body (curl sends Expect: 100-continue) is accepted" \
	"$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/completions" --data-binary @"$tmp/big.json" -m 10)" 400
expect_eq "and answered with the context-length error, not a hang" \
	"$(curl -s "$URL/v1/completions" --data-binary @"$tmp/big.json" -m 10 | jq -r .error.param)" prompt

# --- garbage on the wire never crashes or leaks ---
for i in $(seq 40); do
	# a subshell: a builtin's SIGPIPE must not kill this script
	( { head -c $((RANDOM % 3000 + 1)) /dev/urandom
	    [ $((i % 3)) -eq 0 ] && printf 'POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 5\r\n\r\n{"me'
	  } >/dev/tcp/127.0.0.1/$PORT ) 2>/dev/null || true
done
( printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{"pro\r\nZZ\r\n' >/dev/tcp/127.0.0.1/$PORT ) 2>/dev/null || true
check "after 40 garbage connections the sim still answers" curl -sf -o /dev/null "$URL/health"
expect_eq "a chunked request body is accepted" \
	"$(curl -s -H 'Transfer-Encoding: chunked' "$URL/v1/completions" -d '{"prompt":"chunky","max_tokens":2}' | jq .usage.completion_tokens)" 2
stop_clean "after garbage and errors"

# --- a client that hangs up mid-stream is aborted and its KV freed ---
start_sim slow --speedup 1
curl -s -N -m 0.5 "$URL/v1/completions" -d '{"prompt":"abcd","max_tokens":5000,"stream":true}' >/dev/null 2>&1
sleep 0.3
expect_eq "disconnect: request counted as aborted" "$(metric 'vllm:request_success_total' )" 1
expect_eq "disconnect: nothing left running" "$(metric vllm:num_requests_running)" 0
expect_eq "disconnect: KV pool empty again" "$(metric vllm:kv_cache_usage_perc)" 0
check "sim still serves after the abort" curl -sf -o /dev/null "$URL/health"
stop_clean "after an aborted stream"
