#!/usr/bin/env bash
# deps.sh — install the Debian packages fairgate needs, only those missing,
# and the manifest checker's npm packages (build/npm). Idempotent and quiet
# when everything is there; `--bench` adds the benchmark peers (nginx, wrk).
# Used by `make deps`, `make test`, `make demo`, .ci/run.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)

BUILD_PKGS="build-essential clang llvm libbpf-dev libelf-dev zlib1g-dev bpftool
  libyaml-dev libjansson-dev libyajl-dev libssl-dev libhttp-parser-dev libcmocka-dev libclang-rt-14-dev
  libhiredis-dev"
# redis-server: the fleet tests start their own (agent.fleet's quota store)
RUN_PKGS="iproute2 iptables curl procps util-linux bsdextrautils ethtool jq bc openssl redis-server"
# the image test (selftests/e2e/deploy_image.sh): podman, and runc because
# crun refuses a kernel with a hybrid cgroup layout
RUN_PKGS="$RUN_PKGS podman runc"
# the deploy tests: promtool checks deploy/prometheus-scrape.yaml and a
# real Prometheus scrapes the agent's container with its token
RUN_PKGS="$RUN_PKGS prometheus"
# the manifest checker runs on Node.js; a machine whose nodejs already
# bundles npm (NodeSource's) conflicts with Debian's npm, so ask for them
# only when missing
command -v node >/dev/null && command -v npm >/dev/null || RUN_PKGS="$RUN_PKGS nodejs npm"
BENCH_PKGS="nginx-light wrk"

# selftests/tools/manifest-check's packages, pinned by its lock, into build/npm
npm_deps() {
	local src=$ROOT/selftests/tools/manifest-check dst=$ROOT/build/npm
	if cmp -s "$src/package-lock.json" "$dst/package-lock.json" &&
		[ -d "$dst/node_modules/kubernetes-models" ]; then
		return 0
	fi
	echo "deps: installing the manifest checker's npm packages into build/npm"
	mkdir -p "$dst"
	cp "$src/package.json" "$src/package-lock.json" "$dst/"
	(cd "$dst" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
}

want="$BUILD_PKGS $RUN_PKGS"
[ "${1:-}" = "--bench" ] && want="$BENCH_PKGS"
[ "${1:-}" = "--list" ] && { echo $BUILD_PKGS $RUN_PKGS; exit 0; }

missing=()
for p in $want; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing+=("$p")
	fi
done
if [ ${#missing[@]} -eq 0 ]; then
	[ "${1:-}" = "--bench" ] || npm_deps
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
	echo "deps: missing packages: ${missing[*]}; run 'make deps' as root" >&2
	exit 1
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
# nginx's, redis-server's and prometheus' postinst would start a system
# nginx on :80, Redis on :6379 and Prometheus on :9090; the benchmarks and
# tests start their own, so keep the packages from launching one.
if printf '%s\n' "${missing[@]}" | grep -qE 'nginx|redis|prometheus'; then
	printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d
	trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
[ "${1:-}" = "--bench" ] || npm_deps
