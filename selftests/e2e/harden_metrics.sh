#!/usr/bin/env bash
# harden_metrics.sh — issue #15 case 5: metrics cannot be blinded and are
# not open to whoever reaches the node. 32 (then 100) idle TCP connections to
# the metrics port must not stop a scrape; idle scrape connections are
# closed by a deadline; with agent.metrics_token_file /metrics answers only
# the bearer token (a wrong or missing one gets 401). What the shipped
# DaemonSet binds is checked by pending/harden_metrics_deploy.sh.
source "$(dirname "$0")/harden_env.inc"

px_netns hdmet 153
printf 'metrics-secret-1\n' >"$PX_TMP/metrics.token"
chmod 600 "$PX_TMP/metrics.token"
px_policy
px_start_sim --speedup 0
px_start_agent
scrape() { ip netns exec "$PX_SNS" curl -sS --max-time 2 http://127.0.0.1:9464/metrics "$@" 2>/dev/null; }
lines=$(scrape | grep -c '^fairgate_')
check "a scrape answers ($lines metric lines)" test "$lines" -gt 0
# hold idle connections to the metrics port, in the server namespace
hold_metrics() {
	spawn "$PX_TMP/mhold.$1.log" ip netns exec "$PX_SNS" bash -c '
		fds=()
		for ((i = 0; i < $1; i++)); do exec {fd}<>/dev/tcp/127.0.0.1/9464 || break; fds+=("$fd"); done
		echo "opened ${#fds[@]}"
		while :; do sleep 1; done' _ "$1"
	MHOLD=$SPAWNED_PID
	for _ in $(seq 100); do grep -q opened "$PX_TMP/mhold.$1.log" && break; sleep 0.1; done
}
for n in 32 100; do
	hold_metrics $n
	echo "# $(cat "$PX_TMP/mhold.$n.log")"
	lines=$(scrape | grep -c '^fairgate_')
	check "with $n idle connections to the metrics port a scrape still answers within 2 s ($lines metric lines)" test "$lines" -gt 0
	kill -TERM "$MHOLD"; wait "$MHOLD" 2>/dev/null
done
# an idle scrape connection is closed by a deadline (a scraper that never
# sends its request is not kept forever)
for _ in $(seq 30); do [ "$(scrape | grep -c '^fairgate_')" -gt 0 ] && break; sleep 0.2; done
got=$(ip netns exec "$PX_SNS" timeout 35 bash -c 'exec 3<>/dev/tcp/127.0.0.1/9464; s=$SECONDS; cat <&3 >/dev/null; echo $((SECONDS - s))')
check "an idle metrics connection is kept a moment and closed within 30 s (closed after ${got:-never} s)" \
	test -n "$got" -a "${got:-0}" -ge 1 -a "${got:-99}" -le 30
px_stop_agent_clean

# the token, with the metrics on the node's address as the DaemonSet does
px_policy "  metrics_token_file: $PX_TMP/metrics.token"
px_start_agent --no-bpf --metrics-address "$PX_SRV"
url=http://$PX_SRV:9464/metrics
code=$(pc "$url" -o /dev/null -w '%{http_code}')
expect_eq "from another host, /metrics without the token: 401" "$code" 401
code=$(pc "$url" -H 'Authorization: Bearer metrics-secret-2' -o /dev/null -w '%{http_code}')
expect_eq "/metrics with a wrong token: 401" "$code" 401
code=$(pc "$url" -H 'Authorization: Bearer metrics-secret-1' -o "$PX_TMP/m.txt" -w '%{http_code}')
expect_eq "/metrics with the token: 200" "$code" 200
check "... and the metrics" grep -q '^fairgate_' "$PX_TMP/m.txt"
printf 'metrics-secret-2\n' >"$PX_TMP/metrics.token"
pctl policy apply "$PX_TMP/policy.yaml" >/dev/null 2>&1
code=$(pc "$url" -H 'Authorization: Bearer metrics-secret-2' -o /dev/null -w '%{http_code}')
expect_eq "after policy apply the rotated token is the one: 200" "$code" 200
code=$(pc "$url" -H 'Authorization: Bearer metrics-secret-1' -o /dev/null -w '%{http_code}')
expect_eq "... and the old one gets 401" "$code" 401
n=$(pc "$url" -H 'Authorization: Bearer metrics-secret-2' | awk '$1 == "fairgate_metrics_unauthorized_total" { print $2 }')
check "the 401s are counted (fairgate_metrics_unauthorized_total ${n:-missing})" test "${n:-0}" -ge 3
px_stop_agent_clean
