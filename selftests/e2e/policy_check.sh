#!/usr/bin/env bash
# policy_check.sh — `fairgatectl policy check` as an operator runs it: exit 0
# and a one-line summary for the example policies, exit 2 and exactly one
# "FILE:LINE:COL: message" line for a broken one, and --json in both cases.
# Runs the sanitizer build, so a leak or overflow in the CLI fails here too.
source "$(dirname "$0")/lib.sh"

ctl=$FG_BUILD/fairgatectl
if [ ! -x "$ctl" ]; then
	tap_skip "fairgatectl built" "no $ctl"
	exit 0
fi
tmp=$(mktemp -d)
on_exit "rm -rf $tmp"
cd "$FG_ROOT"

jq_true() { jq -e "$@" >/dev/null; } # FILTER FILE: the filter holds

# run OUT ERR ARGS... ; sets $rc
run() {
	local out=$1 err=$2; shift 2
	"$ctl" policy check "$@" >"$out" 2>"$err"
	rc=$?
}

run $tmp/out $tmp/err examples/policy.yaml
expect_eq "example policy: exit 0" "$rc" 0
check "example policy: one-line summary" grep -qx \
	'examples/policy.yaml: ok - 3 tiers, 3 tenants, 0.91 replicas sold (16558 units/s) of a replica budget of 18233 units/s' $tmp/out
expect_eq "example policy: nothing on stderr" "$(wc -c <$tmp/err)" 0

run $tmp/out $tmp/err examples/policy.json
expect_eq "JSON twin: exit 0" "$rc" 0
run $tmp/out $tmp/err examples/minimal.yaml
expect_eq "minimal policy: exit 0" "$rc" 0

run $tmp/out $tmp/err examples/policy.yaml --json
expect_eq "--json ok: exit 0" "$rc" 0
check "--json ok: fields" jq_true '.ok == true and .n_tiers == 3 and .n_tenants == 3
	and .tenants[1].name == "globex" and .tenants[1].id == 1 and .tenants[1].replicas == 0.25
	and (.replica_units_per_s - 18232 | fabs) < 91
	and (.tenants[1].units_per_s - 4558 | fabs) < 23
	and .tenants[0].sources == ["10.1.0.0/16", "fd00:a::/48"]' $tmp/out

# A broken policy: a misspelt tier on line 6.
cat >$tmp/bad.yaml <<'YAML'
tiers:
  standard: {}
tenants:
  - name: acme
    units_per_s: 100
    tier: standrd
YAML
run $tmp/out $tmp/err $tmp/bad.yaml
expect_eq "bad policy: exit 2" "$rc" 2
expect_eq "bad policy: one error line" "$(cat $tmp/err)" \
	"$tmp/bad.yaml:6:11: tenants[0].tier: unknown tier 'standrd'; did you mean 'standard'?"
expect_eq "bad policy: nothing on stdout" "$(wc -c <$tmp/out)" 0

run $tmp/out $tmp/err $tmp/bad.yaml --json
expect_eq "bad policy --json: exit 2" "$rc" 2
check "bad policy --json: positioned error object" jq_true '.ok == false and .error.line == 6
	and .error.col == 11 and (.error.message | test("did you mean"))
	and (.text | startswith("'"$tmp"'/bad.yaml:6:11: "))' $tmp/out

printf 'tiers: {std: {}}\ntenants: []\n---\n' >$tmp/two.yaml
run $tmp/out $tmp/err $tmp/two.yaml
expect_eq "second YAML document: exit 2" "$rc" 2
check "second YAML document: positioned" grep -q "^$tmp/two.yaml:3:1: " $tmp/err

: >$tmp/empty.yaml
run $tmp/out $tmp/err $tmp/empty.yaml
expect_eq "empty file: exit 2" "$rc" 2

run $tmp/out $tmp/err $tmp/does-not-exist.yaml
expect_eq "missing file: exit 2" "$rc" 2
check "missing file: says so" grep -q "cannot open: No such file" $tmp/err

run $tmp/out $tmp/err
expect_eq "no FILE: usage, exit 2" "$rc" 2
run $tmp/out $tmp/err examples/policy.yaml --bogus
expect_eq "unknown option: exit 2" "$rc" 2
run $tmp/out $tmp/err examples/policy.yaml examples/policy.json
expect_eq "two FILEs: exit 2" "$rc" 2
