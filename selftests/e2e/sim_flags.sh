#!/usr/bin/env bash
# sim_flags.sh — fairgate-sim's vLLM-named flags behave like vLLM's over
# HTTP: --api-key (vLLM's guarded routes, its bare {"error":"Unauthorized"},
# bearer scheme in any case, several keys, VLLM_API_KEY), --scheduling-policy
# (non-zero priority refused under fcfs on every generation API),
# --enable-prompt-tokens-details (details object, or null in a body and
# absent from the usage chunk), --best-of refuse, /version and /ping.
source "$(dirname "$0")/sim_env.inc"

code() { curl -s -o "$tmp/body" -w '%{http_code}' "$@"; }
chat='{"messages":[{"role":"user","content":"x"}],"max_tokens":1}'

start_sim keyed --speedup inf --api-key sk-one --api-key sk-two
for route in /v1/chat/completions /v1/completions /v1/responses /tokenize /detokenize; do
	expect_eq "--api-key: POST $route without a key is 401" "$(code "$URL$route" -d '{}')" 401
done
expect_eq "  answered as vLLM does, not in OpenAI's error shape" "$(cat "$tmp/body")" '{"error":"Unauthorized"}'
expect_eq "  GET /v1/models too" "$(code "$URL/v1/models")" 401
expect_eq "  a wrong key is 401" "$(code "$URL/v1/chat/completions" -H 'Authorization: Bearer sk-three' -d "$chat")" 401
expect_eq "  another scheme is 401" "$(code "$URL/v1/chat/completions" -H 'Authorization: Basic sk-one' -d "$chat")" 401
expect_eq "  the key with a trailing space is 401" "$(code "$URL/v1/chat/completions" -H 'Authorization: Bearer sk-one ' -d "$chat")" 401
expect_eq "  the first key is 200" "$(code "$URL/v1/chat/completions" -H 'Authorization: Bearer sk-one' -d "$chat")" 200
expect_eq "  the second key, scheme in lower case, is 200" "$(code "$URL/v1/chat/completions" -H 'Authorization: bearer sk-two' -d "$chat")" 200
expect_eq "  /tokenize with a key is 200" "$(code "$URL/tokenize" -H 'Authorization: Bearer sk-two' -d '{"prompt":"x"}')" 200
for route in /health /ping /version /metrics; do
	expect_eq "  GET $route stays open" "$(code "$URL$route")" 200
done
expect_eq "  an unknown path is a 404, not a 401" "$(code "$URL/nope")" 404
long=$(head -c 9000 /dev/zero | tr '\0' k)
expect_eq "  a 9 KB Authorization header is refused, not truncated" \
	"$(code "$URL/v1/chat/completions" -H "Authorization: Bearer $long" -d "$chat")" 401
expect_eq "/version answers the sim's version" "$(curl -s "$URL/version" | jq -r .version)" "0.0.0+fairgate-sim"
stop_clean "api keys"

VLLM_API_KEY=sk-env start_sim envkey --speedup inf
expect_eq "VLLM_API_KEY is the key when no --api-key is given" \
	"$(code "$URL/v1/models") $(code "$URL/v1/models" -H 'Authorization: Bearer sk-env')" "401 200"
stop_clean "env key"

start_sim plain --speedup inf --best-of refuse
expect_eq "no --api-key: no authentication" "$(code "$URL/v1/chat/completions" -d "$chat")" 200
for api in chat completions responses; do
	case $api in
	chat) path=/v1/chat/completions b='{"messages":[{"role":"user","content":"x"}],"priority":-5}' ;;
	completions) path=/v1/completions b='{"prompt":"x","priority":-5}' ;;
	responses) path=/v1/responses b='{"input":"x","priority":-5}' ;;
	esac
	expect_eq "fcfs: a non-zero priority on $api is a 400" \
		"$(code "$URL$path" -d "$b") $(jq -r .error.param "$tmp/body")" "400 priority"
done
expect_eq "--enable-prompt-tokens-details off: null details in a body" \
	"$(curl -s "$URL/v1/chat/completions" -d "$chat" | jq -c .usage.prompt_tokens_details)" null
expect_eq "  and no details key in the usage chunk (vLLM drops nulls there)" \
	"$(curl -s -N "$URL/v1/chat/completions" -d "$(jq -c '. + {stream:true, stream_options:{include_usage:true}}' <<<"$chat")" | grep '"choices":\[\]' | sed 's/^data: //' | jq -c '.usage | has("prompt_tokens_details")')" false
expect_eq "--best-of refuse: best_of 2 is vLLM V1's 400" \
	"$(code "$URL/v1/completions" -d '{"prompt":"x","n":2,"best_of":2}') $(jq -r .error.message "$tmp/body")" \
	"400 vLLM V1 does not yet support best_of."
stop_clean "fcfs"

start_sim prio --speedup inf --scheduling-policy priority --enable-prompt-tokens-details
for path in /v1/chat/completions /v1/responses; do
	b=$([ $path = /v1/responses ] && echo '{"input":"x","priority":-5,"max_output_tokens":1}' || echo '{"messages":[{"role":"user","content":"x"}],"priority":-5,"max_tokens":1}')
	expect_eq "priority policy: priority -5 on $path is served" "$(code "$URL$path" -d "$b")" 200
done
expect_eq "--enable-prompt-tokens-details: the details object" \
	"$(curl -s "$URL/v1/chat/completions" -d "$chat" | jq -c .usage.prompt_tokens_details)" '{"cached_tokens":0}'
expect_eq "  also in the usage chunk" \
	"$(curl -s -N "$URL/v1/chat/completions" -d "$(jq -c '. + {stream:true, stream_options:{include_usage:true}}' <<<"$chat")" | grep '"choices":\[\]' | sed 's/^data: //' | jq -c .usage.prompt_tokens_details)" '{"cached_tokens":0}'
expect_eq "--best-of ignore (the default): best_of is ignored, n runs" \
	"$(curl -s "$URL/v1/completions" -d '{"prompt":"x","n":2,"best_of":5,"max_tokens":1}' | jq '.choices|length')" 2
stop_clean "priority"
