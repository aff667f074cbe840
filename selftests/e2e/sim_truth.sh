#!/usr/bin/env bash
# sim_truth.sh — fairgate-sim with a hardware truth apart from the policy,
# and vLLM's timing metrics, over HTTP in virtual time: under the stated
# truth (prefill MFU 0.38, decode MBU 0.62, 3 ms a step, 50 us a sequence)
# a lone prompt's TTFT and decode steps follow the truth, not the policy;
# x-sim-replica-* headers charge each request its shares of the steps and
# add up to the busy time under concurrency; /metrics carries vLLM's
# histograms under vLLM's names, types, labels and buckets, whose counts
# and sums agree with the per-request headers; the default truth is the
# policy's model exactly.
source "$(dirname "$0")/sim_env.inc"
hdr() { grep -i "^$1:" "$2" | head -1 | awk '{ print $2 }' | tr -d '\r'; }
near() { # NAME GOT WANT [REL]
	if awk -v g="$2" -v w="$3" -v r="${4:-1e-6}" 'BEGIN { d = g - w; if (d < 0) d = -d; a = w < 0 ? -w : w; exit !(d <= a * r + 1e-5) }'; then
		tap_ok "$1 = $2"
	else
		tap_fail "$1" "got $2, want $3"
	fi
}
prompt_bytes() { head -c "$1" /dev/zero | tr '\0' "${2:-a}"; }
complete() { # OUT JSON
	printf '%s' "$2" >"$1.req"
	curl -s -D "$1.h" -o "$1.b" "$URL/v1/completions" --data-binary @"$1.req"
}
mval() { curl -s "$URL/metrics" | awk -v m="$1" '$1 ~ "^"m"[{]" { s += $2 } END { printf "%.9f", s + 0 }'; }
# the bucket bounds of a histogram, as one line
buckets() { curl -s "$URL/metrics" | grep "^$1_bucket{" | sed 's/.*le="\([^"]*\)".*/\1/' | tr '\n' ' '; }

# the seed replica under the policy and under the stated truth (ms)
PT_POLICY=$(awk 'BEGIN { printf "%.12f", 2 * 70.55e9 / (4 * 1979e12 * 0.50) * 1e3 }')
PT_TRUE=$(awk 'BEGIN { printf "%.12f", 2 * 70.55e9 / (4 * 1979e12 * 0.38) * 1e3 }')
decode_true_ms() { awk -v t="$1" 'BEGIN { printf "%.12f", (70.55e9 / 4 + t * 327680 / 4) / (3.35e12 * 0.62) * 1e3 }'; }
cat >"$tmp/truth.yaml" <<'YAML'
truth:
  prefill_mfu: 0.38
  decode_mbu: 0.62
  step_overhead_ms: 3
  seq_overhead_us: 50
YAML

# --- the default: the policy's model, no overheads ---
start_sim policy --speedup inf
complete "$tmp/p" "{\"prompt\":\"$(prompt_bytes 8000)\",\"max_tokens\":4}"
near "default truth: lone 2,000-token TTFT = 2,000 x the policy's 35.65 us" \
	"$(hdr x-sim-ttft-ms "$tmp/p.h")" "$(awk -v p="$PT_POLICY" 'BEGIN { printf "%.9f", 2000 * p }')"
near "  a lone request's replica time is its whole e2e" "$(hdr x-sim-replica-ms "$tmp/p.h")" "$(hdr x-sim-e2e-ms "$tmp/p.h")"
near "  split as its TTFT (prefill) and the rest (decode)" "$(hdr x-sim-replica-prefill-ms "$tmp/p.h")" "$(hdr x-sim-ttft-ms "$tmp/p.h")"
near "  /metrics: true and policy prompt-token time agree" "$(mval fairgate_sim_true_prompt_token_seconds)" "$(mval fairgate_sim_policy_prompt_token_seconds)"
stop_clean "policy truth"

# --- the stated truth, from a file ---
start_sim truth --speedup inf --truth "$tmp/truth.yaml"
check "the sim says its truth differs" grep -q "truth differs from the policy: prompt_token 46.907us (policy 35.649us)" "$SIM_LOG"
complete "$tmp/t" "{\"prompt\":\"$(prompt_bytes 8000)\",\"max_tokens\":4}"
near "truth: lone TTFT = 3 ms + 50 us + 2,000 x 46.907 us" \
	"$(hdr x-sim-ttft-ms "$tmp/t.h")" "$(awk -v p="$PT_TRUE" 'BEGIN { printf "%.9f", 3 + 0.05 + 2000 * p }')"
near "truth: TPOT = 3 ms + 50 us + the true decode step at contexts 2001..2003" "$(hdr x-sim-tpot-ms "$tmp/t.h")" \
	"$(awk -v a="$(decode_true_ms 2001)" -v b="$(decode_true_ms 2002)" -v c="$(decode_true_ms 2003)" 'BEGIN { printf "%.9f", 3.05 + (a + b + c) / 3 }')"
near "truth: /metrics' true prompt-token time" "$(mval fairgate_sim_true_prompt_token_seconds)" "$(awk -v p="$PT_TRUE" 'BEGIN { printf "%.12f", p / 1e3 }')"
near "truth: /metrics' policy prompt-token time is the policy's" "$(mval fairgate_sim_policy_prompt_token_seconds)" "$(awk -v p="$PT_POLICY" 'BEGIN { printf "%.12f", p / 1e3 }')"
stop_clean "file truth"

# flags override the file
start_sim flags --speedup inf --truth "$tmp/truth.yaml" --true-step-overhead-ms 0 --true-seq-overhead-us 0
complete "$tmp/f" "{\"prompt\":\"$(prompt_bytes 8000)\",\"max_tokens\":1}"
near "flags over the file: no overheads, the file's MFU" "$(hdr x-sim-ttft-ms "$tmp/f.h")" "$(awk -v p="$PT_TRUE" 'BEGIN { printf "%.9f", 2000 * p }')"
stop_sim
out=$("$sim" --true-prefill-mfu 1.5 2>&1); rc=$?
expect_eq "an MFU above 1 is refused at start" "$rc $(grep -c 'must be in (0, 1]' <<<"$out")" "2 1"
printf 'truth:\n  prefill_mfu: 0.4\n  mfu: 3\n' >"$tmp/bad.yaml"
out=$("$sim" --truth "$tmp/bad.yaml" 2>&1); rc=$?
expect_eq "an unknown key in the truth file is refused with its position" "$rc $(grep -c "bad.yaml:3:3: unknown key 'mfu'" <<<"$out")" "1 1"

# --- concurrency: shares add up; the metrics agree with the headers ---
start_sim load --speedup inf --truth "$tmp/truth.yaml" --max-num-seqs 8
pids=()
for i in $(seq 24); do
	complete "$tmp/c$i" "{\"prompt\":\"$i$(prompt_bytes $((400 + 97 * i)) b)\",\"max_tokens\":$((3 + i % 9))}" &
	pids+=($!)
done
wait "${pids[@]}"   # not the sim, which is a child too
sum_hdr() { for i in $(seq 24); do hdr "$1" "$tmp/c$i.h"; done | awk '{ s += $1 } END { printf "%.6f", s }'; }
sum_out() { for i in $(seq 24); do jq "$1" "$tmp/c$i.b"; done | awk '{ s += $1 } END { print s }'; }
expect_eq "24 concurrent requests answered" "$(for i in $(seq 24); do jq -e .usage "$tmp/c$i.b" >/dev/null && echo ok; done | wc -l)" 24
near "sum of x-sim-replica-ms = the busy time" "$(sum_hdr x-sim-replica-ms)" "$(awk -v b="$(mval fairgate_sim_busy_seconds)" 'BEGIN { printf "%.6f", b * 1e3 }')" 1e-6
near "  = fairgate_sim_replica_seconds_total" "$(sum_hdr x-sim-replica-ms)" "$(awk -v b="$(mval fairgate_sim_replica_seconds_total)" 'BEGIN { printf "%.6f", b * 1e3 }')" 1e-6
near "prefill shares = fairgate_sim_replica_seconds_total{phase=prefill}" "$(sum_hdr x-sim-replica-prefill-ms)" \
	"$(curl -s "$URL/metrics" | awk '/^fairgate_sim_replica_seconds_total.*prefill/ { printf "%.6f", $2 * 1e3 }')" 1e-6

for h in time_to_first_token_seconds e2e_request_latency_seconds request_queue_time_seconds request_prefill_time_seconds \
	request_decode_time_seconds request_inference_time_seconds inter_token_latency_seconds \
	request_time_per_output_token_seconds iteration_tokens_total request_prompt_tokens request_generation_tokens; do
	check "vllm:$h is a histogram labelled model_name and engine" bash -c \
		"curl -s '$URL/metrics' | grep -q '^# TYPE vllm:$h histogram' && curl -s '$URL/metrics' | grep -q '^vllm:${h}_count{model_name=\"llama-3.3-70b\",engine=\"0\"}'"
done
expect_eq "TTFT buckets are vLLM's" "$(buckets vllm:time_to_first_token_seconds)" \
	"0.001 0.005 0.01 0.02 0.04 0.06 0.08 0.1 0.25 0.5 0.75 1 2.5 5 7.5 10 20 40 80 160 640 2560 +Inf "
expect_eq "inter-token latency buckets are vLLM's" "$(buckets vllm:inter_token_latency_seconds)" \
	"0.01 0.025 0.05 0.075 0.1 0.15 0.2 0.3 0.4 0.5 0.75 1 2.5 5 7.5 10 20 40 80 +Inf "
expect_eq "request latency buckets are vLLM's (prefill, decode, e2e share them)" \
	"$(buckets vllm:request_prefill_time_seconds)|$(buckets vllm:request_decode_time_seconds)" \
	"$(buckets vllm:e2e_request_latency_seconds)|$(buckets vllm:e2e_request_latency_seconds)"
expect_eq "  which are 0.3 .. 7680" "$(buckets vllm:e2e_request_latency_seconds)" \
	"0.3 0.5 0.8 1 1.5 2 2.5 5 10 15 20 30 40 50 60 120 240 480 960 1920 7680 +Inf "
expect_eq "iteration token buckets are vLLM's" "$(buckets vllm:iteration_tokens_total)" \
	"1 8 16 32 64 128 256 512 1024 2048 4096 8192 16384 +Inf "
expect_eq "token-count buckets are vLLM's 1-2-5 up to max_model_len" "$(buckets vllm:request_prompt_tokens)" \
	"1 2 5 10 20 50 100 200 500 1000 2000 5000 10000 20000 50000 100000 +Inf "
expect_eq "request histograms count the 24 requests" \
	"$(mval vllm:e2e_request_latency_seconds_count) $(mval vllm:request_prefill_time_seconds_count) $(mval vllm:request_decode_time_seconds_count)" \
	"24.000000000 24.000000000 24.000000000"
near "sum of TTFT = sum of x-sim-ttft-ms" "$(awk -v s="$(mval vllm:time_to_first_token_seconds_sum)" 'BEGIN { printf "%.6f", s * 1e3 }')" "$(sum_hdr x-sim-ttft-ms)" 1e-6
near "sum of e2e latency = sum of x-sim-e2e-ms" "$(awk -v s="$(mval vllm:e2e_request_latency_seconds_sum)" 'BEGIN { printf "%.6f", s * 1e3 }')" "$(sum_hdr x-sim-e2e-ms)" 1e-6
near "sum of queue + prefill time = sum of TTFT" \
	"$(awk -v q="$(mval vllm:request_queue_time_seconds_sum)" -v p="$(mval vllm:request_prefill_time_seconds_sum)" 'BEGIN { printf "%.6f", (q + p) * 1e3 }')" "$(sum_hdr x-sim-ttft-ms)" 1e-6
near "sum of decode time = sum of (e2e - TTFT)" "$(awk -v s="$(mval vllm:request_decode_time_seconds_sum)" 'BEGIN { printf "%.6f", s * 1e3 }')" \
	"$(awk -v e="$(sum_hdr x-sim-e2e-ms)" -v t="$(sum_hdr x-sim-ttft-ms)" 'BEGIN { printf "%.6f", e - t }')" 1e-6
near "sum of per-request TPOT = sum of x-sim-tpot-ms" "$(awk -v s="$(mval vllm:request_time_per_output_token_seconds_sum)" 'BEGIN { printf "%.6f", s * 1e3 }')" "$(sum_hdr x-sim-tpot-ms)" 1e-6
expect_eq "inter-token latencies: one per output token after the first" \
	"$(mval vllm:inter_token_latency_seconds_count | cut -d. -f1)" "$(( $(sum_out .usage.completion_tokens) - 24 ))"
expect_eq "iteration tokens: every prompt once plus every output token" \
	"$(mval vllm:iteration_tokens_total_sum | cut -d. -f1)" "$(( $(sum_out .usage.prompt_tokens) + $(sum_out .usage.completion_tokens) ))"
expect_eq "iteration-token observations: one per engine step (each sampled a token here)" \
	"$(mval vllm:iteration_tokens_total_count | cut -d. -f1)" "$(mval fairgate_sim_steps_total | cut -d. -f1)"
# a 20,000-token prompt prefills in chunks of 8,192, 8,192 and 3,616: vLLM
# observes only steps with outputs, the last chunk's (its first token) and
# the decode
steps0=$(mval fairgate_sim_steps_total | cut -d. -f1) n0=$(mval vllm:iteration_tokens_total_count | cut -d. -f1)
sum0=$(mval vllm:iteration_tokens_total_sum | cut -d. -f1)
complete "$tmp/chunked" "{\"prompt\":\"$(prompt_bytes 80000)\",\"max_tokens\":2}"
expect_eq "a chunked prefill: 4 steps, 2 of them observed, 20,002 tokens" \
	"$(( $(mval fairgate_sim_steps_total | cut -d. -f1) - steps0 )) $(( $(mval vllm:iteration_tokens_total_count | cut -d. -f1) - n0 )) $(( $(mval vllm:iteration_tokens_total_sum | cut -d. -f1) - sum0 ))" \
	"4 2 20002"
expect_eq "the pre-0.11 name is hidden, as in vLLM >= 0.12" "$(curl -s "$URL/metrics" | grep -c '^vllm:time_per_output_token_seconds')" 0
stop_clean "truth under load"

start_sim hidden --speedup inf --show-hidden-metrics-for-version 0.11
complete "$tmp/h" '{"prompt":"abcd","max_tokens":5}'
expect_eq "--show-hidden-metrics-for-version 0.11 adds vllm:time_per_output_token_seconds (the inter-token times)" \
	"$(mval vllm:time_per_output_token_seconds_count) $(mval vllm:inter_token_latency_seconds_count)" "4.000000000 4.000000000"
stop_clean "hidden metrics"
