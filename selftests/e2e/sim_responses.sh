#!/usr/bin/env bash
# sim_responses.sh — fairgate-sim's POST /v1/responses over HTTP: the
# response object (status, output message, incomplete_details, usage with
# input/output details), the streamed event sequence vLLM emits (event: +
# data: lines, sequence_number from 0, deltas that add up to the text,
# response.completed with the same usage, no [DONE]), the prefix cache and
# cache_salt, priority and validation as on chat, and a client that hangs
# up mid-stream is aborted.
source "$(dirname "$0")/sim_env.inc"

start_sim resp --speedup inf --output-len fixed

# 3 + (4 + ceil(8/4)) + (4 + ceil(11/4)) = 16 input tokens
body='{"model":"llama-3.3-70b","instructions":"be brief","input":"hello there","max_output_tokens":5}'
curl -s -D "$tmp/h1" -o "$tmp/r1" "$URL/v1/responses" -d "$body"
expect_eq "object: response, status incomplete (cut by max_output_tokens)" \
	"$(jq -r '[.object, .status, .incomplete_details.reason] | join(" ")' "$tmp/r1")" \
	"response incomplete max_output_tokens"
expect_eq "object: id resp_, one assistant message with one output_text part" \
	"$(jq -r '[(.id|startswith("resp_")), .output[0].type, .output[0].role, .output[0].content[0].type, (.output[0].content|length)] | map(tostring) | join(" ")' "$tmp/r1")" \
	"true message assistant output_text 1"
expect_eq "object: 5 tokens of text, instructions and the cap echoed" \
	"$(jq -r '[(.output[0].content[0].text|length), .instructions, .max_output_tokens] | map(tostring) | join(" ")' "$tmp/r1")" \
	"20 be brief 5"
expect_eq "usage: input, cached, output, total" \
	"$(jq -c '[.usage.input_tokens, .usage.input_tokens_details.cached_tokens, .usage.output_tokens, .usage.output_tokens_details.reasoning_tokens, .usage.total_tokens]' "$tmp/r1")" \
	'[16,0,5,0,21]'
check "virtual timing headers as on chat" grep -qi '^x-sim-ttft-ms: ' "$tmp/h1"
expect_eq "/tokenize of the same conversation as chat gives the same count" \
	"$(curl -s "$URL/tokenize" -d '{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hello there"}]}' | jq .count)" 16

# the same request again: its prefix is cached (16 tokens -> 1 full block of 16, minus the last token rule)
curl -s -o "$tmp/r2" "$URL/v1/responses" -d "$(jq -c '.input = "hello there, and more text after it"' <<<"$body")"
curl -s -o "$tmp/r3" "$URL/v1/responses" -d "$(jq -c '.input = "hello there, and more text after it"' <<<"$body")"
expect_eq "a repeated prompt reports its prefix-cache hit in input_tokens_details" \
	"$(jq .usage.input_tokens_details.cached_tokens "$tmp/r3")" 16
curl -s -o "$tmp/r4" "$URL/v1/responses" -d "$(jq -c '.input = "hello there, and more text after it" | .cache_salt = "other"' <<<"$body")"
expect_eq "another cache_salt shares nothing" "$(jq .usage.input_tokens_details.cached_tokens "$tmp/r4")" 0

# streamed: the event sequence
sbody=$(jq -c '. + {stream:true}' <<<"$body")
curl -s -N -D "$tmp/h5" -o "$tmp/s5" "$URL/v1/responses" -d "$sbody"
check "stream: event-stream content type" grep -qi '^content-type: text/event-stream' "$tmp/h5"
grep '^event: ' "$tmp/s5" | sed 's/^event: //' >"$tmp/types"
expect_eq "stream: vLLM's event sequence" "$(uniq -c "$tmp/types" | awk '{printf "%s%s ", $2, ($1 > 1 ? "x" $1 : "")}')" \
	"response.created response.in_progress response.output_item.added response.content_part.added response.output_text.deltax5 response.output_text.done response.content_part.done response.output_item.done response.completed "
grep '^data: ' "$tmp/s5" | sed 's/^data: //' >"$tmp/s5.json"
expect_eq "stream: each data's type matches its event line" \
	"$(jq -r .type "$tmp/s5.json" | diff - "$tmp/types" >/dev/null && echo same)" same
expect_eq "stream: sequence_number counts 0..N-1" \
	"$(jq -s '[.[].sequence_number] == [range(0; length)]' "$tmp/s5.json")" true
expect_eq "stream: the deltas add up to output_text.done's text and the final output" \
	"$(jq -s -r '([.[] | select(.type=="response.output_text.delta") | .delta] | join("")) == (.[] | select(.type=="response.output_text.done") | .text) and ((.[] | select(.type=="response.output_text.done") | .text) == (.[] | select(.type=="response.completed") | .response.output[0].content[0].text))' "$tmp/s5.json")" true
expect_eq "stream: created and in_progress carry no output and no usage" \
	"$(jq -s -c '[.[] | select(.type=="response.created" or .type=="response.in_progress") | [.response.status, (.response.output|length), .response.usage]]' "$tmp/s5.json")" \
	'[["in_progress",0,null],["in_progress",0,null]]'
expect_eq "stream: response.completed carries the non-streamed usage" \
	"$(jq -c 'select(.type=="response.completed") | .response.usage | [.input_tokens, .output_tokens, .total_tokens]' "$tmp/s5.json")" \
	"$(jq -c '.usage | [.input_tokens, .output_tokens, .total_tokens]' "$tmp/r1")"
expect_eq "stream: no data: [DONE] (vLLM sends none on this API)" "$(grep -c '^data: \[DONE\]' "$tmp/s5")" 0
check "stream: virtual timings in an SSE comment" grep -q '^: x-sim {"ttft_ms":' "$tmp/s5"

# input items: parts and a tool round trip
ibody='{"input":[{"role":"user","content":[{"type":"input_text","text":"what is 6*7?"}]},{"type":"function_call","call_id":"c1","name":"calc","arguments":"{\"e\":\"6*7\"}"},{"type":"function_call_output","call_id":"c1","output":"42"}],"max_output_tokens":2}'
# 3 + (4 + 3) + (4 + ceil(11/4)) + (4 + 1) = 22
expect_eq "input items: message parts, function_call, function_call_output counted" \
	"$(curl -s "$URL/v1/responses" -d "$ibody" | jq .usage.input_tokens)" 22

err() { # NAME BODY WANT_CODE WANT_PARAM
	local out code json
	out=$(curl -s -w '\n%{http_code}' "$URL/v1/responses" -d "$2")
	code=${out##*$'\n'} json=${out%$'\n'*}
	expect_eq "error: $1" "$(jq -r '[.error.type, (.error.param // "null"), (.error.code|tostring)] | join(" ")' <<<"$json") $code" \
		"$([ "$3" = 404 ] && echo NotFoundError || echo BadRequestError) $4 $3 $3"
}
err "missing input" '{}' 400 input
err "unsupported item" '{"input":[{"type":"web_search_call","id":"x"}]}' 400 input
err "max_output_tokens over the context" '{"input":"x","max_output_tokens":131070}' 400 max_output_tokens
err "priority under fcfs" '{"input":"x","priority":3}' 400 priority
err "bad cache_salt" '{"input":"x","cache_salt":"a@b"}' 400 cache_salt
err "unknown model" '{"model":"gpt-9","input":"x"}' 404 model
err "an image on a text-only model" '{"input":[{"role":"user","content":[{"type":"input_image","image_url":"https://x/a.png"}]}]}' 400 null
stop_clean "responses"

# natural stops complete; priority is honoured; a hang-up aborts
start_sim resp2 --speedup 1 --output-len uniform --scheduling-policy priority
st=$(for i in $(seq 12); do curl -s "$URL/v1/responses" -d '{"input":"x","max_output_tokens":4,"priority":-1}' | jq -r '.status + ":" + (.usage.output_tokens|tostring)'; done | sort -u | tr '\n' ' ')
check "uniform lengths: shorter outputs are completed, full ones incomplete ($st)" \
	bash -c "[[ '$st' == *completed* ]] && ! grep -qE 'completed:4|incomplete:[123] ' <<<'$st '"
curl -s -N -m 0.5 "$URL/v1/responses" -d '{"input":"abcd","max_output_tokens":5000,"stream":true}' >/dev/null 2>&1
sleep 0.3
expect_eq "disconnect: the stream's sequence is aborted" \
	"$(curl -s "$URL/metrics" | awk '/^vllm:request_success_total.*abort/ {print $2}')" 1
expect_eq "disconnect: KV pool empty again" "$(metric vllm:kv_cache_usage_perc)" 0
stop_clean "responses stream abort"
