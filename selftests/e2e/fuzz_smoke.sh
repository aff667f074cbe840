#!/usr/bin/env bash
# fuzz_smoke.sh — a short, bounded libFuzzer run of every target in
# selftests/fuzz/ from its committed corpus (FG_FUZZ_SMOKE_SECONDS each,
# default 6; at most FG_FUZZ_SMOKE_RUNS executions; FG_FUZZ_SMOKE_JOBS at
# a time, default 2), one TAP line per target. A crash or broken invariant
# fails the target and prints the saved input's path; `make fuzz` is the
# long run.
source "$(dirname "$0")/lib.sh"
fuzz=$FG_BUILD/fuzz
seconds=${FG_FUZZ_SMOKE_SECONDS:-6}
work=$(mktemp -d); on_exit "rm -rf $work"

targets=$(cd "$FG_ROOT/selftests/fuzz" && ls fuzz_*.c | sed 's/\.c$//')
# two targets at a time (the machine's two cores; nothing else runs beside
# the suite's tests), each reporting into a file of its own, read in order
run_target() { # target
	local t=$1 name=${1#fuzz_} line rc
	mkdir -p "$work/$name"
	ln -s "$fuzz/$t" "$work/$t"
	line=$(FUZZ_RUNS=${FG_FUZZ_SMOKE_RUNS:-5000000} "$FG_ROOT/selftests/fuzz/run.sh" "$work" "$seconds" "$t")
	rc=$?
	printf '%s\n%s\n' "$rc" "$line" >"$work/result.$name"
}
running=0
for t in $targets; do
	name=${t#fuzz_}
	if [ ! -x "$fuzz/$t" ]; then
		echo "missing" >"$work/result.$name"
		continue
	fi
	if [ "$name" = gate ] && [ "$(id -u)" -ne 0 ]; then
		echo "noroot" >"$work/result.$name"
		continue
	fi
	if [ "$running" -ge "${FG_FUZZ_SMOKE_JOBS:-2}" ]; then
		wait -n
		running=$((running - 1))
	fi
	run_target "$t" &
	running=$((running + 1))
done
wait

for t in $targets; do
	name=${t#fuzz_}
	rc=$(sed -n 1p "$work/result.$name" 2>/dev/null)
	line=$(sed -n 2p "$work/result.$name" 2>/dev/null)
	case $rc in
	missing)
		tap_fail "fuzz $name" "$fuzz/$t not built (make BUILD=build/test SAN=1 tests)"
		continue ;;
	noroot)
		tap_skip "fuzz $name" "needs root for BPF_PROG_TEST_RUN"
		continue ;;
	esac
	echo "$line" | sed 's/^/# /'
	if [ "$rc" = 0 ] && [[ $line == ok* ]]; then
		tap_ok "fuzz $name: ${line#*: }"
	elif [[ $line == SKIP* ]]; then
		tap_skip "fuzz $name" "${line#*: }"
	else
		# keep the evidence past this script's cleanup
		keep=$FG_BUILD/test-logs/fuzz
		mkdir -p "$keep"
		cp -r "$work/artifacts/." "$keep/" 2>/dev/null
		cp "$work/logs/$name.log" "$keep/$name.log" 2>/dev/null
		art=$(ls "$keep/$name-"* 2>/dev/null | head -1)
		tap_fail "fuzz $name" "${art:+crash input $art, }log $keep/$name.log${rc:+ (exit $rc)}"
	fi
done
