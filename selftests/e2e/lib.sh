# lib.sh — shared helpers for end-to-end tests (sourced, not run).
#
# TAP output: `tap_ok NAME`, `tap_fail NAME [WHY]`, `check NAME CMD...`,
# `tap_skip NAME WHY`. Cleanup: register with `on_exit CMD...`; everything
# registered runs in reverse order on any exit (pass, fail, signal), so netns,
# veths, XDP attachments, pins and processes never outlive the test.
# Binaries: $FG_BUILD (set by selftests/run.sh; defaults to build/test).
set -u
FG_ROOT=${FG_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
FG_BUILD=${FG_BUILD:-$FG_ROOT/build/test}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
_tap_n=0
_tap_failed=0
_cleanups=()

tap_ok()   { _tap_n=$((_tap_n + 1)); echo "ok $_tap_n - $1"; }
tap_fail() { _tap_n=$((_tap_n + 1)); _tap_failed=1; echo "not ok $_tap_n - $1${2:+: $2}"; }
tap_skip() { _tap_n=$((_tap_n + 1)); echo "ok $_tap_n - $1 # SKIP ${2:-}"; }
check()    { local name=$1; shift; if "$@"; then tap_ok "$name"; else tap_fail "$name"; fi; }
# expect_eq NAME GOT WANT
expect_eq() { if [ "$2" = "$3" ]; then tap_ok "$1"; else tap_fail "$1" "got '$2', want '$3'"; fi; }

on_exit() { _cleanups+=("$*"); }
_run_cleanups() {
	local i
	for ((i = ${#_cleanups[@]} - 1; i >= 0; i--)); do
		eval "${_cleanups[$i]}" >/dev/null 2>&1 || true
	done
	_cleanups=()
}
trap '_run_cleanups; exit $_tap_failed' EXIT
trap 'exit 130' INT TERM

need_root() {
	if [ "$(id -u)" -ne 0 ]; then tap_skip "$1" "needs root"; exit 0; fi
}

# netns_add NAME — create a namespace that is removed on exit.
netns_add() {
	ip netns del "$1" 2>/dev/null || true
	ip netns add "$1"
	on_exit "ip netns del $1"
	ip -n "$1" link set lo up
}

# veth_pair NS_A IF_A NS_B IF_B — a veth between two namespaces.
veth_pair() {
	ip link add "$2" netns "$1" type veth peer name "$4" netns "$3"
	ip -n "$1" link set "$2" up
	ip -n "$3" link set "$4" up
}

# spawn LOG CMD... — start a background process, killed on exit; sets $SPAWNED_PID.
spawn() {
	local log=$1; shift
	"$@" >"$log" 2>&1 &
	SPAWNED_PID=$!
	on_exit "kill -TERM $SPAWNED_PID; sleep 0.2; kill -KILL $SPAWNED_PID"
}

# wait_port [NS] HOST PORT [TIMEOUT_S] — wait until a TCP port accepts.
wait_port() {
	local ns="" host port t
	if [ $# -ge 3 ] && ip netns list | grep -qw "$1"; then ns=$1; shift; fi
	host=$1 port=$2 t=${3:-10}
	local deadline=$((SECONDS + t))
	while [ $SECONDS -lt $deadline ]; do
		if [ -n "$ns" ]; then
			ip netns exec "$ns" bash -c "exec 3<>/dev/tcp/$host/$port" 2>/dev/null && return 0
		else
			bash -c "exec 3<>/dev/tcp/$host/$port" 2>/dev/null && return 0
		fi
		sleep 0.1
	done
	return 1
}

# free_port — an unused loopback TCP port.
free_port() {
	local p
	for _ in $(seq 50); do
		p=$((20000 + RANDOM % 20000))
		ss -Htln "sport = :$p" | grep -q . || { echo "$p"; return; }
	done
	echo 0
}

# bpffs_ready — mount bpffs at /sys/fs/bpf if missing.
bpffs_ready() {
	mount | grep -q 'on /sys/fs/bpf type bpf' || mount -t bpf bpf /sys/fs/bpf
}
