#!/usr/bin/env bash
# build-image.sh — the fairgate image from this repository's binaries,
# without pulling anything: a root filesystem of fairgated, fairgatectl, the
# shared libraries `ldd` lists and the dynamic loader, then
# `podman build` of deploy/Containerfile over it (FROM scratch).
#
#   deploy/build-image.sh [--bin DIR] [--tag IMAGE] [--save FILE]
#   deploy/build-image.sh --print-image      the image name the manifests use
#
# --bin     where the binaries are (default build/, what `make` builds)
# --tag     the image name (default below: deploy/daemonset.yaml runs it)
# --save    also write it as an archive for nodes without a registry:
#           `ctr -n k8s.io images import FILE` (containerd), `podman load -i
#           FILE` (CRI-O), `kind load image-archive FILE`
# CONTAINER_ENGINE: the build command (default podman; docker works too),
# with any global flags it needs (the tests give podman its own storage).
set -euo pipefail
IMAGE=localhost/fairgate:0.1
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$ROOT/build SAVE=""
while [ $# -gt 0 ]; do
	case $1 in
	--bin) BIN=$(cd "$2" && pwd); shift 2 ;;
	--tag) IMAGE=$2; shift 2 ;;
	--save) SAVE=$2; shift 2 ;;
	--print-image) echo "$IMAGE"; exit 0 ;;
	*) echo "usage: $0 [--bin DIR] [--tag IMAGE] [--save FILE] | --print-image" >&2; exit 2 ;;
	esac
done
for b in fairgated fairgatectl; do
	[ -x "$BIN/$b" ] || { echo "build-image: no $BIN/$b; run make first" >&2; exit 1; }
done
ENGINE=${CONTAINER_ENGINE:-podman}

CTX=$BIN/image
rm -rf "$CTX"
mkdir -p "$CTX/rootfs/usr/local/bin" "$CTX/rootfs/etc"
cp "$BIN/fairgated" "$BIN/fairgatectl" "$CTX/rootfs/usr/local/bin/"
cp "$ROOT/deploy/Containerfile" "$CTX/"
# Every library the binaries load, at the path the loader looks for it, and
# the loader itself (ldd's line without "=>").
libs=$(ldd "$BIN/fairgated" "$BIN/fairgatectl" |
	awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// && $1 !~ /:$/ { print $1 }' | sort -u)
[ -n "$libs" ] || { echo "build-image: ldd found no libraries (static binaries?)" >&2; exit 1; }
for lib in $libs; do
	mkdir -p "$CTX/rootfs$(dirname "$lib")"
	cp -L "$lib" "$CTX/rootfs$lib"
done
# The mount points the DaemonSet fills, and the one user there is.
mkdir -p "$CTX/rootfs"/{etc/fairgate/policy,etc/fairgate/tenants,run/fairgate,var/lib/fairgate,sys/fs/bpf,proc,dev,tmp}
echo 'root:x:0:0:root:/:/usr/local/bin/fairgatectl' >"$CTX/rootfs/etc/passwd"
echo 'root:x:0:' >"$CTX/rootfs/etc/group"

$ENGINE build --quiet --tag "$IMAGE" "$CTX" >/dev/null
echo "build-image: built $IMAGE from ${BIN#"$ROOT"/}/ ($(du -sh "$CTX/rootfs" | cut -f1) of files)"
if [ -n "$SAVE" ]; then
	rm -f "$SAVE"
	$ENGINE save --quiet --output "$SAVE" "$IMAGE"
	echo "build-image: saved $IMAGE to $SAVE"
fi
