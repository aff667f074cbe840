#!/usr/bin/env bash
# run.sh FUZZ_DIR SECONDS [TARGET...] — run each libFuzzer target for
# SECONDS, one after the other (the machine is shared), and print one line
# per target: status, runs, exec/s, coverage (edges), corpus size.
#
# Each target starts from its committed seeds (selftests/fuzz/corpus/NAME,
# never written to) plus what earlier runs found (FUZZ_DIR/corpus/NAME,
# where new inputs go), with selftests/fuzz/dict/NAME.dict when present.
# A crash, leak, sanitizer report or broken invariant leaves its input in
# FUZZ_DIR/artifacts/ and the target's log in FUZZ_DIR/logs/; the exit
# status is 1 if any target failed. FUZZ_RUNS caps the executions per
# target (default: no cap). A target exiting 77 is skipped (needs root).
set -u
dir=${1:?usage: run.sh FUZZ_DIR SECONDS [TARGET...]}
seconds=${2:-60}
shift 2 || shift $#
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(cd "$dir" && pwd)
mkdir -p "$dir/corpus" "$dir/artifacts" "$dir/logs"

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
	for f in "$dir"/fuzz_*; do
		[ -x "$f" ] && targets+=("$(basename "$f")")
	done
fi

status=0
for t in "${targets[@]}"; do
	name=${t#fuzz_}
	bin=$dir/fuzz_$name
	seeds=$root/selftests/fuzz/corpus/$name
	dict=$root/selftests/fuzz/dict/$name.dict
	log=$dir/logs/$name.log
	mkdir -p "$dir/corpus/$name"
	args=(-max_total_time="$seconds" -timeout=10 -error_exitcode=1 -rss_limit_mb=2048 -max_len=65536
	      -print_final_stats=1 -artifact_prefix="$dir/artifacts/$name-")
	[ -n "${FUZZ_RUNS:-}" ] && args+=(-runs="$FUZZ_RUNS")
	[ -f "$dict" ] && args+=(-dict="$dict")
	[ -d "$seeds" ] || seeds=
	# the run's own timeout: libFuzzer's clock starts after loading the corpus
	timeout --kill-after=10 $((seconds + 120)) \
		"$bin" "${args[@]}" "$dir/corpus/$name" ${seeds:+"$seeds"} >"$log" 2>&1
	rc=$?
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
	cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)
	ft=$(grep -oE 'ft: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)
	corp=$(find "$dir/corpus/$name" -type f | wc -l)
	summary="runs ${runs:-?}, ${eps:-?} exec/s, cov ${cov:-?} edges, ft ${ft:-?}, corpus +$corp"
	if [ "$rc" -eq 77 ]; then
		echo "SKIP $name: $(tail -1 "$log")"
	elif [ "$rc" -eq 0 ] && [ "${runs:-0}" -gt 0 ]; then
		echo "ok   $name: $summary"
	else
		status=1
		art=$(grep -oE "Test unit written to [^ ]+" "$log" | tail -1 | sed 's/Test unit written to //')
		[ "$rc" -eq 0 ] && rc="0, but no input ran"
		echo "FAIL $name (exit $rc): $summary"
		echo "     log: $log"
		[ -n "$art" ] && echo "     input: $art (reproduce: $bin $art)"
		grep -E 'invariant broken|ERROR: (Address|Leak|libFuzzer)|runtime error|SUMMARY' "$log" |
			head -5 | sed 's/^/     /'
	fi
done
exit $status
