#!/usr/bin/env bash
# harden_limits.sh — issue #15's per-tenant and per-request limits:
# agent.limits.max_inflight_per_tenant (2 here) and agent.timeouts.request_s
# (4 s here), against fairgate-sim in real time (a 4,000-token stream runs
# well past 4 s). Two streams of alpha run; a third request of alpha gets a
# 429 in OpenAI's shape (rate_limit_error / too_many_requests_in_flight, no
# Retry-After) while both streams keep flowing and beta is served. At 4 s
# each stream is ended by request_s: its last event is an error in OpenAI's
# shape (timeout_error / request_timeout), then data: [DONE] and the last
# chunk (a complete HTTP response), billed at what the engine produced;
# nothing is left reserved or in flight, and alpha is served again.
source "$(dirname "$0")/harden_env.inc"

px_netns hdlim 159
px_policy "  limits: {max_inflight_per_tenant: 2}
  timeouts: {request_s: 4}"
px_start_sim
px_start_agent
long='{"messages":[{"role":"user","content":"a long story please"}],"max_tokens":4000,"stream":true}'
for i in 1 2; do
	spawn "$PX_TMP/stream$i.curl" ip netns exec "$PX_CNS" curl -sS -N --max-time 30 "$PX_URL/v1/chat/completions" \
		-H "Authorization: Bearer $PX_KEY_A" -H 'Content-Type: application/json' -d "$long" \
		-o "$PX_TMP/stream$i.out" -w '%{http_code}\n'
done
for _ in $(seq 50); do [ "$(tenant_field alpha inflight)" = 2 ] && break; sleep 0.1; done
events_now() { cat "$PX_TMP/stream$1.out" 2>/dev/null | grep -c '^data: {"id"'; } # 0 before curl made the file
before1=$(events_now 1) before2=$(events_now 2)
expect_eq "alpha has its two streams in flight" "$(tenant_field alpha inflight)" 2

chat $PX_KEY_A '{"messages":[{"role":"user","content":"one more"}],"max_tokens":4}' \
	-D "$PX_TMP/third.hdr" -o "$PX_TMP/third.json" -w '%{http_code}' >"$PX_TMP/third.code"
expect_eq "a third request of alpha gets 429" "$(cat "$PX_TMP/third.code")" 429
expect_eq "  in OpenAI's error shape" \
	"$(jq -r '.error | [(.message | type), .type, .code, (has("param"))] | join(",")' "$PX_TMP/third.json")" \
	"string,rate_limit_error,too_many_requests_in_flight,true"
check "  naming the limit" grep -q 'agent.limits.max_inflight_per_tenant' "$PX_TMP/third.json"
check "  with no Retry-After (when a stream ends is not known)" bash -c "! grep -qi '^retry-after' '$PX_TMP/third.hdr'"
r=$(chat $PX_KEY_B '{"messages":[{"role":"user","content":"hello"}],"max_tokens":4}' -o /dev/null -w '%{http_code}')
expect_eq "beta is served meanwhile" "$r" 200
sleep 0.5
after1=$(events_now 1) after2=$(events_now 2)
check "both streams kept flowing past the 429 ($before1 -> $after1, $before2 -> $after2 events)" \
	test "$after1" -gt "$before1" -a "$after2" -gt "$before2"

for _ in $(seq 100); do [ -s "$PX_TMP/stream1.curl" ] && [ -s "$PX_TMP/stream2.curl" ] && break; sleep 0.1; done
for i in 1 2; do
	last=$(tr -d '\r' <"$PX_TMP/stream$i.out" | grep '^data: {"error"' | tail -1 | sed 's/^data: //')
	echo "# stream $i: $(events_now $i) events, curl: $(cat "$PX_TMP/stream$i.curl" | tr '\n' ' '), last: ${last:0:200}"
	expect_eq "stream $i is a complete 200 response (curl read its last chunk)" "$(cat "$PX_TMP/stream$i.curl")" 200
	expect_eq "stream $i's last event is an OpenAI-shaped request_timeout" \
		"$(jq -r '.error | [(.message | type), .type, .code] | join(",")' <<<"$last" 2>/dev/null)" \
		"string,timeout_error,request_timeout"
	check "  followed by data: [DONE]" bash -c "tail -c 20 '$PX_TMP/stream$i.out' | grep -q '^data: \[DONE\]'"
done
for _ in $(seq 20); do [ "$(tenant_field alpha inflight)" = 0 ] && break; sleep 0.1; done
check "no reservation left behind" no_leaked_reservations
outcomes=$(pctl status --json | jq -c '.tenants[] | select(.name == "alpha") | .outcomes')
echo "# alpha outcomes: $outcomes"
expect_eq "alpha's outcomes: 2 request_timeout, 1 inflight_limited" \
	"$(jq -r '"\(.request_timeout) \(.inflight_limited)"' <<<"$outcomes")" "2 1"
expect_eq "the metric counts the refusal" \
	"$(metric 'fairgate_requests_total{tenant="alpha",outcome="inflight_limited"}')" 1
billed=$(metric 'fairgate_tenant_units_total{tenant="alpha"}')
full=$(awk -v p="$(px_price 32 4000)" 'BEGIN { print 2 * p }')
check "alpha billed less than two full streams ($billed < $full)" float_le "$billed" "$full"
check "  and more than nothing: what the engine produced" float_le 1 "$billed"
r=$(chat $PX_KEY_A '{"messages":[{"role":"user","content":"hello"}],"max_tokens":4}' -o /dev/null -w '%{http_code}')
expect_eq "alpha is served again" "$r" 200
px_stop_agent_clean
