#!/usr/bin/env bash
# sim_tokenize.sh — fairgate-sim's /tokenize and /detokenize over HTTP: for a
# table of chat and completion bodies the count /tokenize answers equals the
# usage.prompt_tokens the same body reports as a request (the promise a
# gateway relies on when it asks before admitting), the count is given past
# max_model_len too, and /detokenize turns a request's prompt and its
# generated text back into text.
source "$(dirname "$0")/sim_env.inc"

start_sim tok --speedup inf --max-model-len 4096 --kv-pool-tokens 65536

chat_bodies=(
	'{"messages":[{"role":"user","content":"hello there, simulator"}]}'
	'{"messages":[{"role":"system","content":"terse"},{"role":"user","content":[{"type":"text","text":"ab"},{"type":"text","text":"cdefg"}]}]}'
	'{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"a partial answer"}],"add_generation_prompt":false,"continue_final_message":true}'
	'{"messages":[{"role":"user","content":"no generation prompt"}],"add_generation_prompt":false}'
	'{"messages":[{"role":"user","content":"\u00e9t\u00e9 \ud83d\ude00 caf\u00e9"}],"cache_salt":"t1"}'
)
for i in "${!chat_bodies[@]}"; do
	b=${chat_bodies[$i]}
	count=$(curl -s "$URL/tokenize" -d "$b" | jq .count)
	usage=$(curl -s "$URL/v1/chat/completions" -d "$(jq -c '. + {max_tokens:2}' <<<"$b")" | jq .usage.prompt_tokens)
	expect_eq "chat body $i: /tokenize count = usage.prompt_tokens" "$count" "$usage"
done
expect_eq "the worked rule: 3 + (4 + ceil(22/4)) = 13" \
	"$(curl -s "$URL/tokenize" -d "${chat_bodies[0]}" | jq .count)" 13

b='{"prompt":"completions count their text alone"}'
expect_eq "completion body: /tokenize count = usage.prompt_tokens" \
	"$(curl -s "$URL/tokenize" -d "$b" | jq .count)" \
	"$(curl -s "$URL/v1/completions" -d "$(jq -c '. + {max_tokens:1}' <<<"$b")" | jq .usage.prompt_tokens)"
expect_eq "answer shape: count, max_model_len, tokens, token_strs" \
	"$(curl -s "$URL/tokenize" -d '{"prompt":"abcdefgh","return_token_strs":true}' | jq -c '[.count, .max_model_len, (.tokens|length), .token_strs]')" \
	'[2,4096,2,["abcd","efgh"]]'

long=$(head -c 20000 /dev/zero | tr '\0' 'x')
expect_eq "a prompt past max_model_len is counted, not refused" \
	"$(curl -s "$URL/tokenize" -d "{\"messages\":[{\"role\":\"user\",\"content\":\"$long\"}]}" | jq .count)" \
	$((3 + 4 + 5000))
expect_eq "while the request itself is refused" \
	"$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/chat/completions" -d "{\"messages\":[{\"role\":\"user\",\"content\":\"$long\"}]}")" 400

text='The quick brown fox, caf\u00e9 cr\u00e8me'
ids=$(curl -s "$URL/tokenize" -d "{\"prompt\":\"$text\"}" | jq -c .tokens)
expect_eq "/detokenize inverts /tokenize" \
	"$(curl -s "$URL/detokenize" -d "{\"tokens\":$ids}" | jq -r .prompt)" \
	"$(jq -rn "\"$text\"")"
expect_eq "/detokenize shows the chat framing" \
	"$(curl -s "$URL/detokenize" -d "$(curl -s "$URL/tokenize" -d '{"messages":[{"role":"user","content":"hi"}]}' | jq -c '{tokens}')" | jq -r .prompt)" \
	'<|start|>user<|sep|>hi<|end|><|start|>assistant<|sep|>'
out=$(curl -s "$URL/v1/completions" -d '{"prompt":"x","max_tokens":6}' | jq -r '.choices[0].text')
out_ids=$(curl -s "$URL/tokenize" -d "$(jq -nc --arg p "$out" '{prompt:$p}')" | jq -c .tokens)
expect_eq "generated text is 6 tokens of the same vocabulary and detokenizes back" \
	"$(jq length <<<"$out_ids") $(curl -s "$URL/detokenize" -d "{\"tokens\":$out_ids}" | jq -r .prompt)" \
	"6 $out"

code() { curl -s -o "$tmp/err" -w '%{http_code}' "$URL$1" -d "$2"; }
expect_eq "/tokenize without prompt or messages is a 400" "$(code /tokenize '{}')" 400
expect_eq "  OpenAI-shaped" "$(jq -r .error.type "$tmp/err")" BadRequestError
expect_eq "/tokenize for another model is a 404" "$(code /tokenize '{"model":"gpt-9","prompt":"x"}')" 404
expect_eq "/detokenize of a negative id is a 400" "$(code /detokenize '{"tokens":[-1]}')" 400
expect_eq "/detokenize of malformed JSON is a 400" "$(code /detokenize '{"tokens":[')" 400
expect_eq "GET /tokenize is a 405" "$(curl -s -o /dev/null -w '%{http_code}' "$URL/tokenize")" 405
stop_clean "tokenize"
