#!/usr/bin/env bash
# harden_policy_big.sh — issue #15 case 7: `policy apply` takes any policy
# `policy check` takes. A full policy (1,024 tenants, each with 8 keys and 16
# sources, written out in block style) is over 1 MiB, under the parser's
# 16 MiB; `fairgatectl policy check` accepts it, so `fairgatectl policy
# apply` must apply it to a running fairgated, which then serves a tenant
# that only the big policy has.
source "$(dirname "$0")/harden_env.inc"

px_netns hdbig 155
px_policy
px_start_sim --speedup 0
px_start_agent
big=$PX_TMP/big.yaml
{
	sed -n '/^tiers:/,/^tenants:/p' "$PX_TMP/policy.yaml"
	for ((i = 0; i < 1024; i++)); do
		if [ "$i" -eq 1023 ]; then key=sk-test-newcomer; name=newcomer; else key=sk-big-$i; name=team-$i; fi
		printf '  # %s: cost centre %05d, on-call rota team-%d@example.com\n' "$name" "$i" "$i"
		printf '  - name: %s\n    tier: standard\n    units_per_s: 100\n    keys:\n' "$name"
		printf '      - "sha256:%s"\n' "$(px_hash "$key")"
		for k in 1 2 3 4 5 6 7; do printf '      - "sha256:%s"\n' "$(px_hash "$key-old-$k")"; done
		printf '    sources:\n'
		for s in $(seq 0 15); do printf '      - 10.%d.%d.%d/32\n' $((i >> 8)) $((i & 255)) $((s + 1)); done
	done
	sed -n '/^agent:/,$p' "$PX_TMP/policy.yaml"
} >"$big"
size=$(stat -c %s "$big")
check "the full policy is over 1 MiB and under the parser's 16 MiB ($size bytes)" test "$size" -gt $((1 << 20)) -a "$size" -lt $((16 << 20))
check "fairgatectl policy check accepts it" "$FG_BUILD/fairgatectl" policy check "$big"
out=$(pctl policy apply "$big" 2>&1); rc=$?
check "fairgatectl policy apply applies it (rc $rc: ${out:0:200})" test "$rc" -eq 0
expect_eq "the running agent has its 1,024 tenants" "$(pctl status --json | jq '.tenants | length')" 1024
r=$(chat sk-test-newcomer '{"messages":[{"role":"user","content":"hi"}],"max_tokens":4}' -o /dev/null -w '%{http_code}')
expect_eq "newcomer, a tenant only the big policy has, is served" "$r" 200
px_stop_agent_clean
