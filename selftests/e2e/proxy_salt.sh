#!/usr/bin/env bash
# proxy_salt.sh — prefix-cache isolation through cache_salt, observed in the
# simulator's own cache accounting (usage.prompt_tokens_details and
# vllm:prefix_cache_hits): a salted tenant hits its own cache, never another
# tenant's, not even when it sends that tenant's salt itself; shared-cache
# tenants are forwarded without any salt.
source "$(dirname "$0")/proxy_env.inc"

px_netns salt 13
px_policy
px_start_sim --speedup 0 --enable-prompt-tokens-details
px_start_agent

# the salt fairgated derives for a tenant: fg1-NAME-hex(HMAC-SHA256(secret, ns || NAME))
salt_of() {
	local hex
	hex=$(od -An -v -tx1 "$PX_TMP/salt.key" | tr -d ' \n')
	printf 'fg1-%s-%s' "$1" "$(printf %s "fairgate/cache_salt/v1:$1" |
		openssl dgst -sha256 -mac HMAC -macopt "hexkey:$hex" | awk '{ print $NF }')"
}
SALT_A=$(salt_of alpha)

# prompt N: a long system prompt no other test request shares a block with
text_of() { printf "Prompt $1. You are the support assistant of a company with a long and very specific system prompt, part %d. " $(seq 1 30); }
body() { # N [EXTRA_JSON_MEMBERS]
	printf '{"messages":[{"role":"system","content":"%s"},{"role":"user","content":"hello"}],"max_tokens":4%s}' \
		"$(text_of "$1")" "${2:+,$2}"
}
cached_via() { # KEY N [EXTRA] — cached_tokens of one request through the agent
	chat "$1" "$(body "$2" "${3:-}")" | jq -r '.usage.prompt_tokens_details.cached_tokens // 0'
}
cached_direct() { # N [EXTRA] — the same request straight to the engine
	sim_direct http://127.0.0.1:8001/v1/chat/completions -H 'Content-Type: application/json' \
		-d "$(body "$1" "${2:-}")" | jq -r '.usage.prompt_tokens_details.cached_tokens // 0'
}

expect_eq "alpha, first time: nothing cached" "$(cached_via $PX_KEY_A 1)" 0
a2=$(cached_via $PX_KEY_A 1)
check "alpha, second time: its own prefix is cached ($a2 tokens)" test "$a2" -gt 0
expect_eq "beta, alpha's prompt: no hit on alpha's prefix" "$(cached_via $PX_KEY_B 1)" 0

cached_via $PX_KEY_A 2 >/dev/null # alpha caches prompt 2; beta never sent it
hits=$(sim_metric 'vllm:prefix_cache_hits')
expect_eq "beta sending prompt 2 with alpha's exact salt: no hit" \
	"$(cached_via $PX_KEY_B 2 "\"cache_salt\":\"$SALT_A\"")" 0
expect_eq "... and the engine's prefix_cache_hits did not move" "$(sim_metric 'vllm:prefix_cache_hits')" "$hits"
# control: that salt really is alpha's namespace at the engine
s=$(cached_direct 2 "\"cache_salt\":\"$SALT_A\"")
check "control: alpha's salt sent straight to the engine hits alpha's prompt 2 ($s tokens)" test "$s" -gt 0
check "salt is valid for vLLM (<= 128 chars, no @ / \\)" \
	bash -c "[ \${#1} -le 128 ] && [[ \$1 != *[@/\\\\]* ]]" _ "$SALT_A"

# shared tenants: no salt forwarded, even when the client sends one
expect_eq "gamma (shared) sending its own salt: no hit on alpha's prompt 1" \
	"$(cached_via $PX_KEY_C 1 "\"cache_salt\":\"mine\"")" 0
s=$(cached_direct 1)
check "control: the unsalted (shared) namespace now holds prompt 1 ($s tokens)" test "$s" -gt 0
# prompt 3 only in the shared namespace: gamma hits it while sending alpha's
# salt, so that salt was not forwarded
expect_eq "control: prompt 3 straight to the engine, unsalted: nothing cached" "$(cached_direct 3)" 0
g=$(cached_via $PX_KEY_C 3 "\"cache_salt\":\"$SALT_A\"")
check "gamma sending alpha's salt is forwarded unsalted (hit the shared prompt 3: $g tokens)" test "$g" -gt 0
check "no reservation left behind" no_leaked_reservations
px_stop_agent_clean
