#!/usr/bin/env bash
# sim_usage.sh — usage reporting over HTTP as vLLM does it: with
# stream_options {include_usage, continuous_usage_stats} every chunk carries
# that choice's running usage (the role chunk 0 completion tokens, each token
# chunk its count so far) and the final usage chunk the sum; continuous
# usage without include_usage adds nothing; --enable-force-include-usage
# turns both on for every stream.
source "$(dirname "$0")/sim_env.inc"

start_sim usage --speedup inf --enable-prompt-tokens-details

data() { grep '^data: {' "$1" | sed 's/^data: //'; }

# chat, n=2: 3 + 4 + ceil(9/4) = 10 prompt tokens, 3 tokens per choice
body='{"messages":[{"role":"user","content":"123456789"}],"max_tokens":3,"n":2,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}'
curl -s -N "$URL/v1/chat/completions" -d "$body" >"$tmp/c.sse"
data "$tmp/c.sse" >"$tmp/c.json"
expect_eq "chat: every chunk with choices carries usage" \
	"$(jq -s '[.[] | select(.choices|length>0) | has("usage")] | all' "$tmp/c.json")" true
expect_eq "chat: role chunks report 0 completion tokens" \
	"$(jq -c 'select(.choices[0].delta.role?) | [.choices[0].index, .usage.prompt_tokens, .usage.completion_tokens, .usage.total_tokens]' "$tmp/c.json" | sort | tr -d '\n')" \
	'[0,10,0,10][1,10,0,10]'
expect_eq "chat: token chunks count each choice's own tokens so far" \
	"$(jq -c 'select(.choices[0].delta.content? // "" | length > 0) | [.choices[0].index, .usage.completion_tokens]' "$tmp/c.json" | sort | tr -d '\n')" \
	'[0,1][0,2][0,3][1,1][1,2][1,3]'
expect_eq "chat: the running usage has no details, like vLLM's" \
	"$(jq -s '[.[] | select(.choices|length>0) | .usage | keys] | unique | .[0] | join(",")' -r "$tmp/c.json")" \
	"completion_tokens,prompt_tokens,total_tokens"
expect_eq "chat: the final usage chunk sums both choices" \
	"$(jq -c 'select(.choices == []) | [.usage.prompt_tokens, .usage.completion_tokens, .usage.total_tokens]' "$tmp/c.json")" \
	'[10,6,16]'

# completions with two prompts: each chunk counts its own prompt
body='{"prompt":["abcdefgh","abcd"],"max_tokens":2,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}'
curl -s -N "$URL/v1/completions" -d "$body" | grep '^data: {' | sed 's/^data: //' >"$tmp/p.json"
expect_eq "completions: each chunk reports its prompt's tokens and its count" \
	"$(jq -c 'select(.choices|length>0) | [.choices[0].index, .usage.prompt_tokens, .usage.completion_tokens]' "$tmp/p.json" | sort | tr -d '\n')" \
	'[0,2,1][0,2,2][1,1,1][1,1,2]'
expect_eq "completions: the final chunk sums prompts and outputs" \
	"$(jq -c 'select(.choices == []) | [.usage.prompt_tokens, .usage.completion_tokens]' "$tmp/p.json")" '[3,4]'

body='{"prompt":"abcd","max_tokens":2,"stream":true,"stream_options":{"continuous_usage_stats":true}}'
expect_eq "continuous_usage_stats without include_usage: no usage anywhere" \
	"$(curl -s -N "$URL/v1/completions" -d "$body" | grep -c usage)" 0
stop_clean "continuous usage"

start_sim forced --speedup inf --enable-force-include-usage
body='{"messages":[{"role":"user","content":"x"}],"max_tokens":2,"stream":true}'
curl -s -N "$URL/v1/chat/completions" -d "$body" | grep '^data: {' | sed 's/^data: //' >"$tmp/f.json"
expect_eq "--enable-force-include-usage: running usage in every chunk" \
	"$(jq -s '[.[] | select(.choices|length>0) | .usage.completion_tokens] | join(",")' -r "$tmp/f.json")" "0,1,2"
expect_eq "  and the final usage chunk" "$(jq -c 'select(.choices == []) | .usage.completion_tokens' "$tmp/f.json")" 2
expect_eq "  and a non-streamed request is unchanged" \
	"$(curl -s "$URL/v1/chat/completions" -d '{"messages":[{"role":"user","content":"x"}],"max_tokens":2}' | jq .usage.completion_tokens)" 2
stop_clean "forced usage"
