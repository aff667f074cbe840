#!/usr/bin/env bash
# meter_shapes.sh — every request shape that reaches the engine is priced,
# and billed what the engine reports within the reservation: a table of
# shapes (chat, streamed with and without usage, n choices, no max_tokens,
# completions with a prompt array x n, token ids, responses streamed and
# not, image and audio parts, /tokenize, /detokenize, a prefix-cache hit)
# with the units billed for each against what fairgate-sim reported, and
# the shapes refused before the engine (best_of, a stored response, video).
# The table is printed as TAP comments.
source "$(dirname "$0")/meter_env.inc"

px_netns mshapes 32
mt_policy "message_tokens: 4, reply_tokens: 3, image_tokens: 576, audio_tokens: 300"
px_start_sim --speedup 0 --enable-prompt-tokens-details --image-tokens 576 --audio-tokens 300
px_start_agent
K="Authorization: Bearer $PX_KEY_A"
CPW=$("$FG_BUILD/fairgatectl" plan --policy "$PX_TMP/policy.yaml" --json | jq -r '.cached_prompt_weight // 0.1')
echo "# shape                          status  prompt cached output    billed  expected"

# usage_of FILE KIND — "prompt cached completion" from a response
usage_of() {
	case $2 in
	json) jq -r '[.usage.prompt_tokens, (.usage.prompt_tokens_details.cached_tokens // 0),
		      .usage.completion_tokens] | @tsv' "$1" ;;
	chunks) sed -n 's/^data: //p' "$1" | grep '"choices":\[\],"usage"' | tail -1 |
		jq -r '[.usage.prompt_tokens, (.usage.prompt_tokens_details.cached_tokens // 0),
			.usage.completion_tokens] | @tsv' ;;
	responses) jq -r '[.usage.input_tokens, (.usage.input_tokens_details.cached_tokens // 0),
			   .usage.output_tokens] | @tsv' "$1" ;;
	events) sed -n 's/^data: //p' "$1" | jq -c 'select(.type == "response.completed") | .response' |
		jq -r '[.usage.input_tokens, (.usage.input_tokens_details.cached_tokens // 0),
			.usage.output_tokens] | @tsv' ;;
	esac
}

# row NAME PATH BODY KIND [STATUS [SEQUENCES [PROMPTS]]] — KIND: how the usage is read (json,
# chunks, responses, events), "tokenize:N" (the engine's count of this
# body, read from the engine, as a client without usage cannot), or
# "flat:UNITS" (billed at its reservation)
row() {
	local name=$1 path=$2 body=$3 kind=$4 want_status=${5:-200} seqs=${6:-1} prompts=${7:-1}
	printf '%s' "$body" >"$PX_TMP/body.json"
	local b0 b1 status p c o expect
	b0=$(billed alpha)
	status=$(pc "$PX_URL$path" -H "$K" -H 'Content-Type: application/json' \
		--data-binary @"$PX_TMP/body.json" -o "$PX_TMP/resp" -w '%{http_code}')
	b1=$(billed alpha)
	local got
	got=$(awk -v a="$b0" -v b="$b1" 'BEGIN { printf "%.4f", b - a }')
	case $kind in
	flat:*) p=- c=- o=- expect=${kind#flat:} ;;
	tokenize:*)
		p=$(jq -c 'del(.stream, .stream_options, .max_tokens)' "$PX_TMP/body.json" |
			sim_direct http://127.0.0.1:8001/tokenize --data-binary @- | jq .count)
		c=0 o=${kind#tokenize:}
		expect=$(units "$p" 0 "$o" "$seqs" "$prompts") ;;
	*)
		read -r p c o < <(usage_of "$PX_TMP/resp" "$kind")
		expect=$(units "$p" "$c" "$o" "$seqs" "$prompts") ;;
	esac
	[ "$want_status" != 200 ] && { p=- c=- o=- expect=0; }
	printf '# %-30s %6s %7s %6s %6s %9s %9s\n' "$name" "$status" "$p" "$c" "$o" "$got" "$expect"
	if [ "$status" = "$want_status" ] && near "$got" "$expect"; then
		tap_ok "$name: $status, billed $got = $expect"
	else
		tap_fail "$name: $status, billed $got = $expect" "want status $want_status; $(head -c 300 "$PX_TMP/resp")"
	fi
}

msg() { printf '{"messages":[{"role":"user","content":"%s"}]%s}' "$1" "${2:+,$2}"; }
img=$(head -c 112500 /dev/urandom | base64 -w0) # a ~150 KB data URL: one image, not ~37K tokens

row "chat" /v1/chat/completions "$(msg 'the weather in Lisbon this week, hour by hour, with the tides, the wind and the rain' '"max_tokens":20')" json
row "chat, no max_tokens (tier's 64)" /v1/chat/completions "$(msg 'tell me more')" json
check "  the engine was told 64, not its own default of 256" \
	test "$(jq .usage.completion_tokens "$PX_TMP/resp")" = 64
row "chat, n = 3" /v1/chat/completions "$(msg 'three ways' '"max_tokens":10,"n":3')" json 200 3
row "chat, stream (no usage asked)" /v1/chat/completions \
	"$(msg 'a stream' '"max_tokens":12,"stream":true')" tokenize:12
check "  no usage reached the client" bash -c "! grep -q '\"usage\"' $PX_TMP/resp"
row "chat, stream, include_usage" /v1/chat/completions \
	"$(msg 'a stream with usage' '"max_tokens":12,"stream":true,"stream_options":{"include_usage":true}')" chunks
check "  per-chunk usage not shown (it was not asked for)" \
	test "$(grep -c '"usage"' "$PX_TMP/resp")" = 1
row "chat, stream, continuous usage" /v1/chat/completions \
	"$(msg 'a stream with all usage' '"max_tokens":12,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}')" chunks
check "  every chunk's usage shown (it was asked for)" \
	test "$(grep -c '"usage"' "$PX_TMP/resp")" -ge 13
row "completions" /v1/completions '{"prompt":"once upon a time","max_tokens":8}' json
row "completions, 3 prompts x n = 2" /v1/completions \
	'{"prompt":["one prompt","a second prompt","and a third one"],"n":2,"max_tokens":5}' json 200 6 3
check "  the engine ran 3 x 2 sequences of 5" test "$(jq '.choices | length' "$PX_TMP/resp")" = 6
row "completions, token ids" /v1/completions "{\"prompt\":[$(seq -s, 1 100)],\"max_tokens\":4}" json
row "responses" /v1/responses '{"input":"what is fair queueing","instructions":"be brief","max_output_tokens":12}' responses
expect_eq "  the engine was told its cap" "$(jq .max_output_tokens "$PX_TMP/resp")" 12
row "responses, stream" /v1/responses '{"input":"stream it","max_output_tokens":9,"stream":true}' events
row "chat, 150 KB image" /v1/chat/completions \
	"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"describe\"},{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,$img\"}}]}],\"max_tokens\":3}" json
with_image=$(jq .usage.prompt_tokens "$PX_TMP/resp")
text_only=$(sim_direct http://127.0.0.1:8001/tokenize \
	-d '{"messages":[{"role":"user","content":[{"type":"text","text":"describe"}]}]}' | jq .count)
expect_eq "  576 prompt tokens for the image, as the policy said" "$((with_image - text_only))" 576
row "chat, audio part" /v1/chat/completions \
	'{"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"UklGRg==","format":"wav"}}]}],"max_tokens":3}' json
# priced by its body: 12 chars at the tenant's own ratio, as prefix-cache hits
cpt=$(tenant_field alpha 'chars_per_token[""] // 4')
row "tokenize (12 chars)" /tokenize '{"prompt":"hello world!"}' \
	"flat:$(awk -v k="$CPW" -v r="$cpt" 'BEGIN { t = 12 / r; t = t == int(t) ? t : int(t) + 1; printf "%.4f", t * k }')"
expect_eq "  the engine answered it" "$(jq .count "$PX_TMP/resp")" 3
row "detokenize (4 ids)" /detokenize '{"tokens":[1819043176,1752440943,6648421,33]}' \
	"flat:$(awk -v k="$CPW" 'BEGIN { printf "%.4f", 4 * k }')"
row "chat again (prefix-cache hit)" /v1/chat/completions "$(msg 'the weather in Lisbon this week, hour by hour, with the tides, the wind and the rain' '"max_tokens":20')" json
check "  cached tokens priced at $CPW" test "$(jq .usage.prompt_tokens_details.cached_tokens "$PX_TMP/resp")" -gt 0
# refused before the engine, free
row "completions, best_of 3" /v1/completions '{"prompt":"x","best_of":3,"max_tokens":2}' - 400
expect_eq "  names best_of" "$(jq -r .error.param "$PX_TMP/resp")" best_of
row "responses, previous_response_id" /v1/responses '{"input":"x","previous_response_id":"resp_1"}' - 400
row "chat, video part" /v1/chat/completions \
	'{"messages":[{"role":"user","content":[{"type":"video_url","video_url":{"url":"https://x/v.mp4"}}]}]}' - 400
expect_eq "  unsupported_content" "$(jq -r .error.code "$PX_TMP/resp")" unsupported_content

# issue #20's conversation: 20,000 messages of 20 bytes, 180,003 tokens by
# the engine's count (3 + 20,000 x (4 + 5)); the estimate counts the
# template's tokens per message too (it said ~127.5K when it did not)
{
	printf '{"messages":['
	yes '{"role":"user","content":"twenty bytes of text"}' | head -n 20000 | paste -sd, -
	printf '],"max_tokens":10}'
} >"$PX_TMP/conv.json"
code=$(pc "$PX_URL/v1/chat/completions" -H "$K" --data-binary @"$PX_TMP/conv.json" -o "$PX_TMP/resp" -w '%{http_code}')
expect_eq "20,000 messages: 400, needing 180,003 + 10 tokens of context" \
	"$code $(jq -r .error.message "$PX_TMP/resp" | grep -o 'needs [a-z ]*[0-9]* tokens')" "400 needs 180013 tokens"

# a text-only model (the policy's default: image_tokens 0) refuses images itself
sed -i 's/image_tokens: 576, //' "$PX_TMP/policy.yaml"
pctl policy apply "$PX_TMP/policy.yaml" >/dev/null
code=$(pc "$PX_URL/v1/chat/completions" -H "$K" -d "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"https://x/a.png\"}}]}]}" -o "$PX_TMP/resp" -w '%{http_code}')
expect_eq "image_tokens 0: an image is a 400 before the engine" "$code $(jq -r .error.param "$PX_TMP/resp")" "400 messages"
check "no reservation left behind" no_leaked_reservations
px_stop_agent_clean
