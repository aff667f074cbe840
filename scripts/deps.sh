#!/usr/bin/env bash
# deps.sh — install the Debian packages fairgate needs, only those missing.
# Idempotent and quiet when everything is there; `--bench` adds the benchmark
# peers (nginx, wrk). Used by `make deps`, `make test`, `make demo`, .ci/run.
set -euo pipefail

BUILD_PKGS="build-essential clang llvm libbpf-dev libelf-dev zlib1g-dev bpftool
  libyaml-dev libjansson-dev libyajl-dev libssl-dev libhttp-parser-dev libcmocka-dev libclang-rt-14-dev
  libhiredis-dev"
# redis-server: the fleet tests start their own (agent.fleet's quota store)
RUN_PKGS="iproute2 iptables curl procps util-linux bsdextrautils ethtool jq bc openssl redis-server"
BENCH_PKGS="nginx-light wrk"

want="$BUILD_PKGS $RUN_PKGS"
[ "${1:-}" = "--bench" ] && want="$BENCH_PKGS"
[ "${1:-}" = "--list" ] && { echo $BUILD_PKGS $RUN_PKGS; exit 0; }

missing=()
for p in $want; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing+=("$p")
	fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "deps: missing packages: ${missing[*]}; run 'make deps' as root" >&2
	exit 1
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
# nginx's and redis-server's postinst would start a system nginx on :80 and a
# system Redis on :6379; the benchmarks and tests start their own, so keep the
# packages from launching one.
if printf '%s\n' "${missing[@]}" | grep -qE 'nginx|redis'; then
	printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d
	trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
