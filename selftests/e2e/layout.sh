#!/usr/bin/env bash
# layout.sh — the rooms keep one direction of calls (scripts/check-layout.sh
# on the tree and the test build's objects), and the check can fail: in a
# copy of the tree, an upward include and a call cycle are each caught.
source "$(dirname "$0")/lib.sh"
chk=$FG_ROOT/scripts/check-layout.sh
tmp=$(mktemp -d); on_exit "rm -rf $tmp"

if "$chk" "$FG_ROOT" "$FG_BUILD" >"$tmp/out" 2>&1; then
	tap_ok "no upward include, no call cycle between files ($(grep -c '^  .* -> ' "$tmp/out") cross-room includes)"
else
	tap_fail "layout holds" "$(grep -E '^(UPWARD|CYCLE|NO )' "$tmp/out" | head -n 20 | tr '\n' ';')"
fi

# An upward include in a copy of the sources (policy/ naming the proxy).
mkdir -p "$tmp/tree"
(cd "$FG_ROOT" && cp -r lib maps policy bpf agent cli sim bench "$tmp/tree/")
echo '#include "agent/proxy/proxy.h"' >>"$tmp/tree/policy/token_bucket.c"
if "$chk" "$tmp/tree" >"$tmp/up" 2>&1; then
	tap_fail "an upward include fails the check" "it passed"
else
	check "an upward include fails the check, named" grep -q '^UPWARD policy/token_bucket.c -> agent/proxy/proxy.h' "$tmp/up"
fi

# A call cycle between two files of different rooms, from real objects.
mkdir -p "$tmp/cyc/obj/lib" "$tmp/cyc/obj/agent/kernel" "$tmp/cyc/src/lib" "$tmp/cyc/src/agent/kernel"
echo 'void fg_b(void); void fg_a(void) { fg_b(); }' >"$tmp/cyc/src/lib/a.c"
echo 'void fg_a(void); void fg_b(void) { fg_a(); }' >"$tmp/cyc/src/agent/kernel/b.c"
cc -c "$tmp/cyc/src/lib/a.c" -o "$tmp/cyc/obj/lib/a.o" &&
	cc -c "$tmp/cyc/src/agent/kernel/b.c" -o "$tmp/cyc/obj/agent/kernel/b.o"
if "$chk" "$tmp/cyc/src" "$tmp/cyc" >"$tmp/cy" 2>&1; then
	tap_fail "a call cycle fails the check" "it passed"
else
	check "a call cycle fails the check, named" grep -q '^CYCLE agent/kernel/b.c <-> lib/a.c' "$tmp/cy"
fi
