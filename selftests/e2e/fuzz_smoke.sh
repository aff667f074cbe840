#!/usr/bin/env bash
# fuzz_smoke.sh — a short, bounded libFuzzer run of every target in
# selftests/fuzz/ from its committed corpus (FG_FUZZ_SMOKE_SECONDS each,
# default 10; at most FG_FUZZ_SMOKE_RUNS executions), one TAP line per
# target. A crash or broken invariant fails the target and prints the
# saved input's path; `make fuzz` is the long run.
source "$(dirname "$0")/lib.sh"
fuzz=$FG_BUILD/fuzz
seconds=${FG_FUZZ_SMOKE_SECONDS:-10}
work=$(mktemp -d); on_exit "rm -rf $work"

targets=$(cd "$FG_ROOT/selftests/fuzz" && ls fuzz_*.c | sed 's/\.c$//')
for t in $targets; do
	name=${t#fuzz_}
	if [ ! -x "$fuzz/$t" ]; then
		tap_fail "fuzz $name" "$fuzz/$t not built (make BUILD=build/test SAN=1 tests)"
		continue
	fi
	if [ "$name" = gate ] && [ "$(id -u)" -ne 0 ]; then
		tap_skip "fuzz $name" "needs root for BPF_PROG_TEST_RUN"
		continue
	fi
	# a scratch output dir: the committed corpus is only read
	mkdir -p "$work/$name"
	ln -s "$fuzz/$t" "$work/$t"
	line=$(FUZZ_RUNS=${FG_FUZZ_SMOKE_RUNS:-5000000} "$FG_ROOT/selftests/fuzz/run.sh" "$work" "$seconds" "$t")
	rc=$?
	echo "$line" | sed 's/^/# /'
	if [ "$rc" -eq 0 ] && [[ $line == ok* ]]; then
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
		tap_fail "fuzz $name" "${art:+crash input $art, }log $keep/$name.log"
	fi
done
