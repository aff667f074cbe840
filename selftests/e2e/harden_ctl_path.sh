#!/usr/bin/env bash
# harden_ctl_path.sh — issue #15 case 6: `--ctl PATH` never deletes what is
# not a socket. fairgated started with --ctl naming a regular file (or a
# symlink to one) must refuse to start, say why, and leave the file as it
# was; a socket left over from a SIGKILLed fairgated is still taken over.
source "$(dirname "$0")/harden_env.inc"

px_netns hdctl 154
px_policy
px_start_sim --speedup 0
agent_once() { # CTL_PATH — fairgated that must exit by itself within 5 s
	timeout 5 nsenter --net=/run/netns/"$PX_SNS" "$FG_BUILD/fairgated" --policy "$PX_TMP/policy.yaml" \
		--ctl "$1" --no-bpf >"$PX_TMP/once.log" 2>&1
}
printf 'precious data\n' >"$PX_TMP/precious"
cp "$PX_TMP/precious" "$PX_TMP/precious.orig"
rc=0; agent_once "$PX_TMP/precious" || rc=$?
check "--ctl naming a regular file: fairgated refuses to start (rc $rc; 124 = it ran)" test "$rc" -ne 0 -a "$rc" -ne 124
check "... and says the path is not a socket" grep -qi 'not a socket' "$PX_TMP/once.log"
check "... and the file is untouched" cmp -s "$PX_TMP/precious" "$PX_TMP/precious.orig"
echo "# fairgated said: $(head -3 "$PX_TMP/once.log" | tr '\n' '|')"

cp "$PX_TMP/precious.orig" "$PX_TMP/precious"
ln -sf "$PX_TMP/precious" "$PX_TMP/link.sock"
rc=0; agent_once "$PX_TMP/link.sock" || rc=$?
check "--ctl naming a symlink to a regular file: refused (rc $rc)" test "$rc" -ne 0 -a "$rc" -ne 124
check "... the link and its target are untouched" bash -c "[ -L '$PX_TMP/link.sock' ] && cmp -s '$PX_TMP/precious' '$PX_TMP/precious.orig'"

# the control socket a SIGKILLed fairgated left behind is taken over
px_start_agent
kill -KILL "$PX_AGENT_PID"; wait "$PX_AGENT_PID" 2>/dev/null
check "a SIGKILLed fairgated leaves its socket" test -S "$PX_TMP/ctl.sock"
px_start_agent
check "a new fairgated takes the stale socket over and answers on it" pctl health --timeout 3
px_stop_agent_clean
