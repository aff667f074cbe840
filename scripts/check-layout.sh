#!/usr/bin/env bash
# check-layout.sh [ROOT] [BUILD_DIR] — the rooms' one direction of calls.
#
# 1. Includes: prints every #include "..." that crosses from one room to
#    another and fails on an upward one. Rooms and their ranks (a room may
#    include its own rank or lower; docs/design.md explains each):
#      0 lib                  system libraries only
#      1 maps, policy, bpf    the kernel ABI and its userspace side; pure logic
#      2 agent/http, agent/kernel
#      3 agent/proxy, agent/fleet
#      4 agent (its top-level files but fairgated.c: the policy transaction,
#        the watch, agent.h)
#      5 agent/ctl
#      6 agent/fairgated.c
#    Side rooms, ranked apart: cli (fairgatectl) may use lib, maps, policy;
#    sim may use lib, policy; bench may use lib, maps, policy, sim (the
#    engine it drives), with the exceptions listed below. agent/agent.h
#    (the process's state, opaque pointers to each room) may be included
#    by any room of agent/.
# 2. Calls: with BUILD_DIR (its obj/ tree), reads `nm` of every object of
#    the rooms above, builds the file graph (a file -> the file defining a
#    symbol it leaves undefined) and fails on any call cycle between files
#    that are not all in agent/proxy/ (the connection state machine, whose
#    files may call each other).
# Exit 0 when the layout holds, 1 with every violation printed.
set -u
ROOT=$(cd "${1:-$(dirname "$0")/..}" && pwd)
BUILD=${2:-}
cd "$ROOT" || exit 2
bad=0

room_of() { # path -> room name
	case $1 in
	lib/*) echo lib ;;
	maps/*) echo maps ;;
	policy/*) echo policy ;;
	bpf/*) echo bpf ;;
	agent/fairgated.c) echo agent/fairgated.c ;;
	agent/*/*) echo "${1%/*}" ;;
	agent/*) echo agent ;;
	cli/*) echo cli ;;
	sim/*) echo sim ;;
	bench/*) echo bench ;;
	*) echo other ;;
	esac
}

rank_of() { # room -> rank ("" for a side room)
	case $1 in
	lib) echo 0 ;;
	maps | policy | bpf) echo 1 ;;
	agent/http | agent/kernel) echo 2 ;;
	agent/proxy | agent/fleet) echo 3 ;;
	agent) echo 4 ;;
	agent/ctl) echo 5 ;;
	agent/fairgated.c) echo 6 ;;
	esac
}

# Exceptions, each with its reason. fg-decision-bench measures the agent's
# own request parsing and key hashing in-process: it has to link them.
allowed_exception() { # file header
	case "$1 $2" in
	"bench/fg-decision-bench.c agent/http/http_request.h") return 0 ;;
	"bench/fg-decision-bench.c agent/proxy/identity.h") return 0 ;;
	esac
	return 1
}

include_ok() { # from_room to_room to_path
	local f=$1 t=$2 fr tr
	[ "$f" = "$t" ] && return 0
	case $f in
	cli) case $t in lib | maps | policy) return 0 ;; esac; return 1 ;;
	sim) case $t in lib | policy) return 0 ;; esac; return 1 ;;
	bench) case $t in lib | maps | policy | sim) return 0 ;; esac; return 1 ;;
	esac
	[ "$3" = agent/agent.h ] && case $f in agent*) return 0 ;; esac
	fr=$(rank_of "$f"); tr=$(rank_of "$t")
	[ -n "$fr" ] && [ -n "$tr" ] && [ "$tr" -le "$fr" ]
}

echo "# cross-room includes"
while IFS=: read -r file _ line; do
	hdr=$(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' <<<"$line")
	[ -n "$hdr" ] || continue
	case $hdr in */*) ;; *) continue ;; esac # same-folder or generated (skeletons)
	from=$(room_of "$file"); to=$(room_of "$hdr")
	[ "$from" = "$to" ] && continue
	if include_ok "$from" "$to" "$hdr" || allowed_exception "$file" "$hdr"; then
		echo "  $file -> $hdr ($from -> $to)"
	else
		echo "UPWARD $file -> $hdr ($from -> $to)"
		bad=1
	fi
done < <(grep -rn --include='*.c' --include='*.h' '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' \
	lib maps policy bpf agent cli sim bench 2>/dev/null)

if [ -n "$BUILD" ]; then
	echo "# call cycles between files (nm of $BUILD/obj)"
	objs=$(cd "$BUILD/obj" 2>/dev/null && find lib maps policy agent cli sim -name '*.o' 2>/dev/null | sort)
	if [ -z "$objs" ]; then
		echo "NO OBJECTS under $BUILD/obj"
		bad=1
	else
		out=$(cd "$BUILD/obj" && for o in $objs; do
			[ -f "$ROOT/${o%.o}.c" ] || continue # a stale object of a moved file
			nm "$o" | awk -v f="${o%.o}.c" '
				NF == 3 && $2 ~ /^[TDBRC]$/ { print "D", f, $3 }
				NF == 2 && $1 == "U" { print "U", f, $2 }'
		done | awk '
			$1 == "D" { def[$3] = $2; next }
			{ use[++n] = $2; sym[n] = $3 }
			END {
				for (i = 1; i <= n; i++) {
					t = def[sym[i]]
					if (t == "" || t == use[i]) continue
					if (!((use[i], t) in e)) { e[use[i], t] = 1; node[use[i]] = 1; node[t] = 1 }
				}
				for (ab in e) r[ab] = 1 # Warshall: r is reachability
				for (k in node) for (a in node) if (r[a, k] == 1)
					for (b in node) if (r[k, b] == 1) r[a, b] = 1
				for (a in node) for (b in node) if (a < b && r[a, b] == 1 && r[b, a] == 1) {
					da = a; sub(/\/[^\/]*$/, "", da); db = b; sub(/\/[^\/]*$/, "", db)
					if (da == "agent/proxy" && db == "agent/proxy") print "ok", a, b
					else print "CYCLE", a, b
				}
			}')
		if grep -q '^CYCLE' <<<"$out"; then
			grep '^CYCLE' <<<"$out" | sort | sed 's/^CYCLE /CYCLE /; s/ \([^ ]*\)$/ <-> \1/'
			bad=1
		fi
		n_ok=$(grep -c '^ok' <<<"$out")
		echo "  $n_ok pairs of files call each other inside agent/proxy/ (allowed)"
	fi
fi
[ "$bad" -eq 0 ] && echo "layout holds" || echo "layout broken"
exit "$bad"
