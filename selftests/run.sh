#!/usr/bin/env bash
# run.sh BUILD_DIR [RELEASE_DIR] — run every test and print one closing line
# "N passed, N failed, N skipped".
#
# Unit and BPF tests are cmocka programs in BUILD_DIR/tests/, run with TAP
# output; end-to-end tests are selftests/e2e/*.sh, which print TAP themselves
# (selftests/e2e/lib.sh). With RELEASE_DIR (make test gives build/, the -O2
# flavour without sanitizers) its cmocka programs run once more, named
# release/NAME, so a bug that the sanitizers' layout hides still fails; the
# closing line counts both runs. A program that dies without reporting counts
# as one failure, so a crash can never pass silently. FG_TEST_FILTER=regex
# narrows (it sees the release/ prefix).
set -u
BUILD=${1:-build/test}
RELEASE=${2:-}
export FG_BUILD=$(cd "$BUILD" && pwd)
# the -O2 build, for tests that ship binaries (the image test)
export FG_RELEASE=${RELEASE:+$(cd "$RELEASE" && pwd)}
export FG_ROOT=$(cd "$(dirname "$0")/.." && pwd)
export CMOCKA_MESSAGE_OUTPUT=TAP
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
filter=${FG_TEST_FILTER:-.}
logdir=$FG_BUILD/test-logs
mkdir -p "$logdir"
passed=0 failed=0 skipped=0
failures=()

run_one() { # name, command...
	local name=$1; shift
	local log=$logdir/$name.log
	mkdir -p "$(dirname "$log")"
	local start=$(date +%s)
	timeout --kill-after=10 "${FG_TEST_TIMEOUT:-600}" "$@" >"$log" 2>&1
	local rc=$?
	local p f s
	p=$(grep -cE '^ok [0-9]+' "$log" | tr -d ' ')
	# cmocka's TAP marks a skip "not ok N # SKIP"; the scripts "ok N # SKIP"
	s=$(grep -cE '^(not )?ok [0-9]+.*# ?SKIP' "$log" | tr -d ' ')
	local s_not=$(grep -cE '^not ok [0-9]+.*# ?SKIP' "$log" | tr -d ' ')
	f=$(grep -cE '^not ok [0-9]+' "$log" | tr -d ' ')
	p=$((p - (s - s_not)))
	f=$((f - s_not))
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		f=1
		echo "not ok - $name exited with status $rc without reporting a failure" >>"$log"
	fi
	if [ $((p + f + s)) -eq 0 ]; then
		f=1
		echo "not ok - $name reported no test" >>"$log"
	fi
	passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
	printf '%-34s %3d passed %3d failed %3d skipped  (%ds)\n' "$name" "$p" "$f" "$s" $(( $(date +%s) - start ))
	if [ "$f" -gt 0 ]; then
		failures+=("$name")
		grep -E '^not ok|ERROR|error:|Assert|FAIL|runtime error|AddressSanitizer' "$log" | head -n 30 | sed 's/^/    /'
	fi
}

for t in "$FG_BUILD"/tests/*; do
	[ -x "$t" ] || continue
	name=$(basename "$t")
	[[ $name =~ $filter ]] || continue
	run_one "$name" "$t"
done
if [ -n "$RELEASE" ]; then
	for t in "$RELEASE"/tests/*; do
		[ -x "$t" ] || continue
		name=release/$(basename "$t")
		[[ $name =~ $filter ]] || continue
		run_one "$name" "$t"
	done
fi
for t in "$FG_ROOT"/selftests/e2e/*.sh; do
	[ -f "$t" ] || continue
	case $(basename "$t") in lib.sh) continue ;; esac
	name=e2e_$(basename "$t" .sh)
	[[ $name =~ $filter ]] || continue
	run_one "$name" bash "$t"
done

if [ ${#failures[@]} -gt 0 ]; then
	echo "failed: ${failures[*]} (logs in $logdir)"
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
