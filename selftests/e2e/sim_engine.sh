#!/usr/bin/env bash
# sim_engine.sh — fairgate-sim's engine model seen through HTTP, asserted in
# virtual time (x-sim-* headers and /metrics, never the wall clock): a lone
# 2,000-token prompt's TTFT is 2,000 prompt-token times, TPOT is the decode
# step formula, the prefix cache hits for the same prompt and misses with
# another cache_salt, an over-subscribed KV pool preempts and recomputes
# while a fitting load does not, and the same requests with the same seed
# give the same numbers. Also: --policy with the example policy.
source "$(dirname "$0")/sim_env.inc"
hdr() { grep -i "^$1:" "$2" | head -1 | awk '{ print $2 }' | tr -d '\r'; }
# near NAME GOT WANT [REL] — relative tolerance (default 1e-6), plus 1e-6 absolute
# because headers print ms with 6 decimals
near() {
	if awk -v g="$2" -v w="$3" -v r="${4:-1e-6}" 'BEGIN { d = g - w; if (d < 0) d = -d; a = w < 0 ? -w : w; exit !(d <= a * r + 1e-6) }'; then
		tap_ok "$1 = $2"
	else
		tap_fail "$1" "got $2, want $3"
	fi
}
prompt_bytes() { head -c "$1" /dev/zero | tr '\0' "${2:-a}"; }
complete() { # OUT_PREFIX JSON — POST /v1/completions, headers to OUT.h, body to OUT.b
	printf '%s' "$2" >"$1.req"   # bodies can exceed the argument-size limit
	curl -s -D "$1.h" -o "$1.b" "$URL/v1/completions" --data-binary @"$1.req"
}

# The cost model from the seed's replica (policy_defaults): 2*params/(gpus*flops*mfu)
PT_MS=$(awk 'BEGIN { printf "%.12f", 2 * 70.55e9 / (4 * 1979e12 * 0.50) * 1e3 }')
# decode step at total context T: (weights/gpu + T*kv_bytes/gpu) / (hbm*mbu)
decode_ms() { awk -v t="$1" 'BEGIN { printf "%.12f", (70.55e9 / 4 + t * 327680 / 4) / (3.35e12 * 0.75) * 1e3 }'; }

start_sim timing --speedup inf --enable-prompt-tokens-details
p2000=$(prompt_bytes 8000)   # 8,000 bytes = 2,000 tokens
complete "$tmp/lone" "{\"prompt\":\"$p2000\",\"max_tokens\":4}"
expect_eq "lone prompt: 2,000 prompt tokens" "$(jq .usage.prompt_tokens "$tmp/lone.b")" 2000
near "lone 2,000-token prompt: TTFT = 2,000 x prompt-token time (ms)" \
	"$(hdr x-sim-ttft-ms "$tmp/lone.h")" "$(awk -v p="$PT_MS" 'BEGIN { printf "%.9f", 2000 * p }')"
near "seed check: 2,000 x 35.7 us ~ 71.4 ms" "$(hdr x-sim-ttft-ms "$tmp/lone.h")" 71.4 0.005
# decode steps at batch 1: contexts 2001, 2002, 2003 — TPOT is their mean
near "TPOT at batch 1 = mean decode step of contexts 2001..2003 (ms)" \
	"$(hdr x-sim-tpot-ms "$tmp/lone.h")" \
	"$(awk -v a="$(decode_ms 2001)" -v b="$(decode_ms 2002)" -v c="$(decode_ms 2003)" 'BEGIN { printf "%.9f", (a + b + c) / 3 }')"
expect_eq "lone prompt: no queueing" "$(hdr x-sim-queue-ms "$tmp/lone.h")" 0.000000

# batch B=64 at context C=1700: 64 prompts of 1,699 tokens prefilled in one step
# (budget raised), then every decode step reads 64 contexts
stop_sim
start_sim batch --speedup inf --max-num-batched-tokens 131072
prompts=$(for i in $(seq 64); do printf '"%s",' "$(printf '%04d' "$i")$(prompt_bytes 6792)"; done)
complete "$tmp/batch" "{\"prompt\":[${prompts%,}],\"max_tokens\":2}"
expect_eq "batch: 64 choices" "$(jq '.choices | length' "$tmp/batch.b")" 64
# TTFT = one prefill step of 64 x 1,699 tokens; E2E adds one decode step at 64 x 1,700
near "batch: TTFT = 64 x 1,699 prompt tokens" "$(hdr x-sim-ttft-ms "$tmp/batch.h")" \
	"$(awk -v p="$PT_MS" 'BEGIN { printf "%.9f", 64 * 1699 * p }')"
near "decode step at B=64, C=1,700 matches the formula (TPOT, ms)" "$(hdr x-sim-tpot-ms "$tmp/batch.h")" \
	"$(decode_ms $((64 * 1700)))"

# --- prefix cache and cache_salt ---
stop_sim
start_sim cache --speedup inf --enable-prompt-tokens-details
chat() { # OUT CONTENT [SALT]
	local salt=""
	[ -n "${3:-}" ] && salt=",\"cache_salt\":\"$3\""
	curl -s -D "$1.h" -o "$1.b" "$URL/v1/chat/completions" \
		-d "{\"messages\":[{\"role\":\"system\",\"content\":\"$2\"},{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":1$salt}"
}
sys=$(prompt_bytes 7000 s)
chat "$tmp/c1" "$sys"
chat "$tmp/c2" "$sys"
chat "$tmp/c3" "$sys" tenant-a
chat "$tmp/c4" "$sys" tenant-a
chat "$tmp/c5" "$sys" tenant-b
# prompt = 3 + (4 + 1750) + (4 + 1) = 1762 tokens; 110 full blocks cacheable
expect_eq "cache: first request misses" "$(jq .usage.prompt_tokens_details.cached_tokens "$tmp/c1.b")" 0
expect_eq "cache: the same prompt again hits 110 blocks" "$(jq .usage.prompt_tokens_details.cached_tokens "$tmp/c2.b")" 1760
near "cache: the hit's TTFT is 2 uncached tokens" "$(hdr x-sim-ttft-ms "$tmp/c2.h")" "$(awk -v p="$PT_MS" 'BEGIN { printf "%.9f", 2 * p }')"
expect_eq "cache: a salted request does not see the unsalted entry" "$(jq .usage.prompt_tokens_details.cached_tokens "$tmp/c3.b")" 0
expect_eq "cache: the same salt hits" "$(jq .usage.prompt_tokens_details.cached_tokens "$tmp/c4.b")" 1760
expect_eq "cache: another salt misses" "$(jq .usage.prompt_tokens_details.cached_tokens "$tmp/c5.b")" 0
expect_eq "cache: x-sim-cached-tokens header agrees" "$(hdr x-sim-cached-tokens "$tmp/c4.h")" 1760
expect_eq "metrics: vllm:prefix_cache_hits_total" "$(metric vllm:prefix_cache_hits_total)" 3520
expect_eq "metrics: vllm:prefix_cache_queries_total" "$(metric vllm:prefix_cache_queries_total)" $((5 * 1762))

# --- KV pressure: 6 x (2,000 + 2,000) tokens in a 8,192-token pool ---
stop_sim
start_sim pressure --speedup inf --kv-pool-tokens 8192 --max-model-len 8192
"$load" --target "127.0.0.1:$PORT" --tenant "big::0:8000:2000" --closed --connections 6 --requests 6 \
	--path /v1/completions >"$tmp/pressure.json" 2>"$tmp/pressure.err"
expect_eq "pressure: all 6 requests answered 200" "$(jq '.tenants[0].status["200"]' "$tmp/pressure.json")" 6
expect_eq "pressure: every token delivered despite preemption" "$(jq '.tenants[0].completion_tokens' "$tmp/pressure.json")" 12000
pre=$(metric vllm:num_preemptions_total)
rec=$(metric fairgate_sim_recomputed_tokens_total)
check "pressure: vllm:num_preemptions_total > 0 (got $pre)" test "$pre" -gt 0
check "pressure: recomputed tokens counted (got $rec)" test "$rec" -gt 0
expect_eq "pressure: KV pool empty afterwards" "$(metric vllm:kv_cache_usage_perc)" 0

stop_sim
start_sim fits --speedup inf --kv-pool-tokens 8192 --max-model-len 8192
"$load" --target "127.0.0.1:$PORT" --tenant "fit::0:8000:1000" --closed --connections 2 --requests 2 \
	--path /v1/completions >"$tmp/fits.json" 2>&1
expect_eq "fitting load (2 x 3,000 tokens): all answered" "$(jq '.tenants[0].status["200"]' "$tmp/fits.json")" 2
expect_eq "fitting load: no preemption" "$(metric vllm:num_preemptions_total)" 0
expect_eq "fitting load: nothing recomputed" "$(metric fairgate_sim_recomputed_tokens_total)" 0

# --- determinism: same requests, same seed -> same numbers ---
run_sequence() { # SEED OUT
	stop_sim
	start_sim "det$1" --speedup inf --output-len uniform --seed "$1" --kv-pool-tokens 16384 --max-model-len 8192
	: >"$2"
	for i in $(seq 12); do
		complete "$tmp/d" "{\"prompt\":\"$(prompt_bytes $((400 * (i % 5 + 1))) x)$i\",\"max_tokens\":$((50 + 20 * i))}"
		echo "$(jq -c '[.usage, .choices[0].finish_reason]' "$tmp/d.b") $(hdr x-sim-ttft-ms "$tmp/d.h") $(hdr x-sim-e2e-ms "$tmp/d.h") $(hdr x-sim-arrival-s "$tmp/d.h")" >>"$2"
	done
	curl -s "$URL/metrics" | grep -E '^(vllm:|fairgate_sim_)' | grep -v http_ >>"$2"
}
run_sequence 7 "$tmp/run1"
run_sequence 7 "$tmp/run2"
run_sequence 8 "$tmp/run3"
check "determinism: same seed, same responses, timings and metrics" cmp -s "$tmp/run1" "$tmp/run2"
check "determinism: another seed changes output lengths" bash -c "! cmp -s $tmp/run1 $tmp/run3"
check "uniform output: some requests stop early" grep -q '"stop"' "$tmp/run1"

# --- pacing: at --speedup 10 a 1-virtual-second request takes ~0.1 s of wall time ---
stop_sim
start_sim paced --speedup 10
start=$(date +%s%N)
complete "$tmp/paced" '{"prompt":"abcd","max_tokens":140}'
wall_ms=$(( ($(date +%s%N) - start) / 1000000 ))
e2e=$(hdr x-sim-e2e-ms "$tmp/paced.h")
# 140 tokens x ~7.0 ms = ~0.98 virtual s -> ~98 ms real; generous bounds for a loaded machine
check "pacing: virtual $e2e ms took $wall_ms ms at speedup 10" \
	awk -v w="$wall_ms" -v e="$e2e" 'BEGIN { exit !(w >= e / 10 - 5 && w <= e / 10 + 1500) }'

# --- the example policy (its replica block is the seed's) ---
stop_sim
if [ -f "$FG_ROOT/examples/policy.yaml" ]; then
	PORT=$(sim_port)
	spawn "$tmp/pol.log" "$sim" --policy "$FG_ROOT/examples/policy.yaml" --listen "127.0.0.1:$PORT" --speedup inf
	if wait_port 127.0.0.1 "$PORT" 5; then
		URL=http://127.0.0.1:$PORT
		complete "$tmp/pol" "{\"prompt\":\"$p2000\",\"max_tokens\":1}"
		near "--policy examples/policy.yaml: TTFT from its replica block" "$(hdr x-sim-ttft-ms "$tmp/pol.h")" \
			"$(awk -v p="$PT_MS" 'BEGIN { printf "%.9f", 2000 * p }')" 0.005
	else
		tap_skip "--policy examples/policy.yaml" "refused: $(head -c 200 "$tmp/pol.log")"
	fi
else
	tap_skip "--policy examples/policy.yaml" "no example policy"
fi
"$sim" --policy /nonexistent.yaml --listen 127.0.0.1:0 >"$tmp/nopol.log" 2>&1
rc=$?
check "a missing policy file is a clear error (exit $rc)" \
	bash -c "[ $rc -ne 0 ] && grep -q nonexistent.yaml '$tmp/nopol.log'"
