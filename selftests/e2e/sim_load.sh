#!/usr/bin/env bash
# sim_load.sh — fg-load against fairgate-sim from hundreds of concurrent
# keep-alive connections: nothing is lost (every request sent gets exactly
# one 200, every token reaches the client), and the sim's /metrics agree
# with what the clients counted. Closed loop at full speed, then open loop
# (Poisson) with the engine paced to the wall clock.
source "$(dirname "$0")/sim_env.inc"
sum() { jq "[.tenants[].$1] | add" "$2"; }

check "fg-load --help documents --tenant" bash -c "'$load' --help | grep -q 'NAME:KEY:RATE:PROMPT_CHARS:MAX_TOKENS'"
check "fg-load refuses a bad tenant spec" bash -c "! '$load' --target 127.0.0.1:1 --tenant 'x:y:z' 2>/dev/null"

# --- closed loop: 3 tenants x 100 connections, 1,500 requests, two of them streaming ---
start_sim closed --speedup inf --enable-prompt-tokens-details --max-num-seqs 256
"$load" --target "127.0.0.1:$PORT" --closed --connections 100 --requests 500 --prefix-chars 400 \
	--tenant "acme:key-a:0:1200:24" --tenant "globex:key-g:0:600:16:stream" \
	--tenant "initech::0:300:8:stream" --timeout 120 >"$tmp/closed.json" 2>"$tmp/closed.err"
rc=$?
expect_eq "closed loop: fg-load exits 0 (no transport error)" "$rc" 0
expect_eq "closed loop: 1,500 sent" "$(sum sent "$tmp/closed.json")" 1500
expect_eq "closed loop: 1,500 answered 200" "$(jq '[.tenants[].status["200"] // 0] | add' "$tmp/closed.json")" 1500
expect_eq "closed loop: no errors" \
	"$(jq '[.tenants[].errors | to_entries[].value] | add' "$tmp/closed.json")" 0
expect_eq "closed loop: all 300 connections opened and kept alive" "$(jq .connections_opened "$tmp/closed.json")" 300
expect_eq "closed loop: every token arrived (24x500 + 16x500 + 8x500)" \
	"$(sum tokens_received "$tmp/closed.json")" 24000
expect_eq "sim agrees: vllm:request_success_total" "$(metric vllm:request_success_total)" 1500
expect_eq "sim agrees: vllm:generation_tokens_total" "$(metric vllm:generation_tokens_total)" 24000
expect_eq "sim agrees: vllm:prompt_tokens_total" "$(metric vllm:prompt_tokens_total)" "$(sum prompt_tokens "$tmp/closed.json")"
expect_eq "sim agrees: prefix-cache hits = cached_tokens reported" \
	"$(metric vllm:prefix_cache_hits_total)" "$(sum cached_tokens "$tmp/closed.json")"
check "the shared prefixes hit the cache" test "$(sum cached_tokens "$tmp/closed.json")" -gt 0
expect_eq "sim is idle afterwards" "$(metric vllm:num_requests_running) $(metric vllm:num_requests_waiting) $(metric vllm:kv_cache_usage_perc)" "0 0 0"
check "streams reported TTFT" test "$(jq '.tenants[1].ttft_ms.p50 > 0' "$tmp/closed.json")" = true
stop_clean "after 1,500 requests on 300 connections"

# --- open loop, Poisson arrivals, engine paced at 20x wall time ---
start_sim open --speedup 20
"$load" --target "127.0.0.1:$PORT" --poisson --connections 64 --duration 3 --drain 20 \
	--tenant "a:k1:40:2000:32" --tenant "b:k2:40:800:64:stream" >"$tmp/open.json" 2>"$tmp/open.err"
rc=$?
expect_eq "open loop: fg-load exits 0" "$rc" 0
sent=$(sum sent "$tmp/open.json")
check "open loop: about 240 requests sent in 3 s (got $sent)" test "$sent" -gt 150 -a "$sent" -lt 340
expect_eq "open loop: every sent request answered 200" \
	"$(jq '[.tenants[].status["200"] // 0] | add' "$tmp/open.json")" "$sent"
expect_eq "open loop: sim counted the same" "$(metric vllm:request_success_total)" "$sent"
expect_eq "open loop: no backlog dropped" "$(sum backlog_dropped "$tmp/open.json")" 0
stop_clean "after open loop"
