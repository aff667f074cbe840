#!/usr/bin/env bash
# proxy_body.sh — a Content-Length body read straight into its own buffer
# (proxy_client.c, body_room) arrives whole, however it is cut: headers
# first and the body in many small writes, a body of exactly
# agent.max_body_bytes followed by a pipelined request on the same
# connection, one byte more refused with 413, Expect: 100-continue, and a
# client that hangs up mid-body (nothing stays counted in the
# buffered-bytes budget, nothing reserved). Bodies are a small chat request
# padded with JSON whitespace, so their size is free while their prompt
# stays small.
source "$(dirname "$0")/proxy_env.inc"

MAX=200000
px_netns body 37
px_policy "  max_body_bytes: $MAX
  timeouts: {header_s: 2, body_s: 3, idle_s: 5}"
px_start_sim --speedup 0
px_start_agent

head_for() { # CONTENT_LENGTH [EXTRA_HEADER_LINES]
	printf 'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %s\r\n%b\r\n' \
		"$PX_KEY_A" "$1" "${2:-}"
}
# padded SIZE — the chat request, padded with spaces to SIZE bytes
chat_json='{"messages":[{"role":"user","content":"the body arrives whole"}],"max_tokens":3}'
padded() { printf '%s%*s' "$chat_json" $(($1 - ${#chat_json})) ''; }

# send_cut FILE PIECE PAUSE READ_S [TAIL_FILE] — from the client namespace:
# the head (first line of FILE.head), then FILE in PIECE-byte writes with
# PAUSE between them, then TAIL_FILE (a pipelined request) if given; prints
# what came back within READ_S seconds.
send_cut() {
	ip netns exec "$PX_CNS" timeout $(($4 + 20)) bash -c '
		exec 3<>/dev/tcp/'"$PX_SRV"'/8000 || exit 1
		cat "$1.head" >&3
		size=$(stat -c %s "$1") off=0
		while [ $off -lt $size ]; do
			dd if="$1" bs=1 skip=$off count=$2 iflag=skip_bytes,count_bytes status=none >&3
			off=$((off + $2))
			sleep "$3"
		done
		[ -n "$5" ] && cat "$5" >&3
		timeout "$4" cat <&3' _ "$@"
}
statuses() { grep -ao 'HTTP/1.1 [0-9]*' | awk '{ printf "%s%s", sep, $2; sep = " " }'; }
prompt_tokens() { grep -ao '"prompt_tokens":[0-9]*' | head -1 | cut -d: -f2; }

# 1. one write (the fast path) against the same body in 40 small writes
padded 4000 >"$PX_TMP/small"
head_for 4000 >"$PX_TMP/small.head"
whole=$( { cat "$PX_TMP/small.head" "$PX_TMP/small"; } | ip netns exec "$PX_CNS" timeout 10 bash -c '
	exec 3<>/dev/tcp/'"$PX_SRV"'/8000 || exit 1; cat >&3; timeout 2 cat <&3')
cut=$(send_cut "$PX_TMP/small" 100 0.01 2)
expect_eq "a body in one write: 200" "$(statuses <<<"$whole")" 200
expect_eq "the same body in 40 writes after its head: 200" "$(statuses <<<"$cut")" 200
expect_eq "  with the same prompt count (the body arrived whole, in order)" \
	"$(prompt_tokens <<<"$cut")" "$(prompt_tokens <<<"$whole")"

# 2. exactly max_body_bytes, in large writes, then a pipelined request
padded $MAX >"$PX_TMP/max"
head_for $MAX >"$PX_TMP/max.head"
printf 'GET /health HTTP/1.1\r\nHost: x\r\n\r\n' >"$PX_TMP/health"
out=$(send_cut "$PX_TMP/max" 65536 0.05 3 "$PX_TMP/health")
expect_eq "a body of exactly agent.max_body_bytes, then a pipelined request: both answered in order" \
	"$(statuses <<<"$out")" "200 200"
expect_eq "  the body's prompt counted as the small one's" "$(prompt_tokens <<<"$out")" "$(prompt_tokens <<<"$whole")"

# 3. one byte more: refused at the head, before any of it is read
head_for $((MAX + 1)) >"$PX_TMP/over.head"
padded $((MAX + 1)) >"$PX_TMP/over"
expect_eq "agent.max_body_bytes + 1: 413" "$(send_cut "$PX_TMP/over" 65536 0 2 | statuses)" 413

# 4. Expect: 100-continue, then the body straight after the invitation
head_for 4000 'Expect: 100-continue\r\n' >"$PX_TMP/cont.head"
cp "$PX_TMP/small" "$PX_TMP/cont"
expect_eq "Expect: 100-continue with a key: 100, then 200" \
	"$(send_cut "$PX_TMP/cont" 1000 0.2 2 | statuses)" "100 200"

# 5. a hang-up mid-body: nothing stays held or reserved, the agent serves on
held_before=$(metric fairgate_buffered_bytes)
head -c 120000 "$PX_TMP/max" >"$PX_TMP/half"
ip netns exec "$PX_CNS" timeout 20 bash -c '
	exec 3<>/dev/tcp/'"$PX_SRV"'/8000 || exit 1
	cat "$1" >&3; sleep 0.3; cat "$2" >&3; sleep 0.5' _ "$PX_TMP/max.head" "$PX_TMP/half"
sleep 0.5
expect_eq "a client gone mid-body leaves no byte in the buffered-bytes budget" \
	"$(metric fairgate_buffered_bytes)" "${held_before:-0}"
check "  and no reservation" no_leaked_reservations
expect_eq "  and the agent answers the next request" "$(send_cut "$PX_TMP/small" 4000 0 2 | statuses)" 200

px_stop_agent_clean
