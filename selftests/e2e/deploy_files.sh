#!/usr/bin/env bash
# deploy_files.sh — what deploy/ ships stays valid: the DaemonSet's embedded
# policy and every example policy pass `fairgatectl policy check`, and the
# unit and the manifest run the binaries and flags fairgated really has.
source "$(dirname "$0")/lib.sh"
ctl=$FG_BUILD/fairgatectl
tmp=$(mktemp -d); on_exit "rm -rf $tmp"

awk '/policy.yaml: \|/{f=1; next} /^---/{f=0} f' "$FG_ROOT/deploy/daemonset.yaml" | sed 's/^    //' >"$tmp/ds.yaml"
check "daemonset ConfigMap holds a policy" test -s "$tmp/ds.yaml"
check "daemonset policy passes policy check" "$ctl" policy check "$tmp/ds.yaml"
for f in "$FG_ROOT"/examples/*.yaml "$FG_ROOT"/examples/*.json; do
	check "example $(basename "$f") passes policy check" "$ctl" policy check "$f"
done
# the flags the unit and the manifest pass exist
help=$("$FG_BUILD/fairgated" --help 2>&1)
check "fairgated takes --policy" grep -q -- '--policy' <<<"$help"
check "unit starts fairgated --policy" grep -q 'ExecStart=/usr/local/bin/fairgated --policy' "$FG_ROOT/deploy/fairgate.service"
check "unit reloads with policy apply" grep -q 'fairgatectl policy apply' "$FG_ROOT/deploy/fairgate.service"
check "manifest runs fairgated --policy" grep -q '"/usr/local/bin/fairgated", "--policy"' "$FG_ROOT/deploy/daemonset.yaml"
check "manifest mounts bpffs from the host" grep -q 'path: /sys/fs/bpf' "$FG_ROOT/deploy/daemonset.yaml"
