#!/usr/bin/env bash
# deploy_image.sh — the image deploy/build-image.sh builds, run the way
# deploy/daemonset.yaml runs it: podman with exactly the DaemonSet's
# settings (read from the manifest by the checker's --describe: command and
# args with $(NODE_IP) expanded, capabilities, seccomp, AppArmor,
# no-new-privileges, read-only root, user, memory limit, every volume with
# its propagation), in the host network of a namespace this test creates, in
# front of fairgate-sim started with the vLLM manifest's flags. The node's
# /sys/fs/bpf is a directory of this test made a shared mount point, which
# the privileged init container (Bidirectional) fills with a bpffs; the
# ConfigMap and Secret are directories the test updates the way the kubelet
# does. Checked: the init container mounts bpffs for the host; the agent
# starts, attaches gate where the default route goes (interfaces: auto);
# both probes pass inside the container; the example tenant's request is
# served and an unauthenticated one is refused by fairgated; metrics answer
# on the node address only, and only the token of the Secret the operator
# creates (a real Prometheus with deploy/prometheus-scrape.yaml's job scrapes
# them); bpftool on the host reads the tenant by name; a
# deny window survives a restart and a SIGKILL (the crashed agent's gate
# replaced without CAP_SYS_ADMIN); a Secret edit adds a tenant without exec,
# a broken one changes nothing; a stop detaches gate and keeps the pins.
source "$(dirname "$0")/deploy_env.inc"
quiet() { "$@" >/dev/null; }
need_root "the image under podman"
need_manifest_checker "the image under podman"
for tool in podman runc bpftool jq curl; do
	command -v $tool >/dev/null || { tap_skip "the image under podman" "$tool is not installed (make deps installs it)"; exit 0; }
done

BIN=${FG_RELEASE:-$FG_BUILD}   # the image ships the -O2 build when there is one
TMP=$(mktemp -d /tmp/fgt-img.XXXXXX)
on_exit "rm -rf $TMP"
# podman's own store inside build/ (the image cache between runs) with its
# state beside it: its database remembers these paths, so they stay put.
# The state is a leftover of the last run (nothing of ours runs now), so
# it goes, the way a reboot clears /run. runc: crun refuses this kernel's
# hybrid cgroup layout.
STORE=$FG_ROOT/build/podman
rm -rf "$STORE/run" "$STORE/tmp"
PODMAN=(podman --root "$STORE/root" --runroot "$STORE/run" --tmpdir "$STORE/tmp"
	--cgroup-manager cgroupfs --events-backend file --runtime runc)
if ! out=$("${PODMAN[@]}" info 2>&1 >/dev/null); then
	tap_fail "podman runs" "$(tail -1 <<<"$out")"
	exit 1
fi

# ---- the image ----
if out=$(CONTAINER_ENGINE="${PODMAN[*]}" "$FG_ROOT/deploy/build-image.sh" --bin "$BIN" 2>&1); then
	tap_ok "deploy/build-image.sh builds $(deploy_image=$("$FG_ROOT/deploy/build-image.sh" --print-image); echo "$deploy_image") from $(basename "$BIN")/, nothing pulled"
else
	tap_fail "deploy/build-image.sh builds the image" "$out"
	exit 1
fi
"${PODMAN[@]}" image prune -f >/dev/null 2>&1 # earlier builds' layers
POD=$(manifest_describe) || { tap_fail "the checker describes the DaemonSet"; exit 1; }
IMAGE=$(jq -r .image <<<"$POD")
expect_eq "the DaemonSet runs the image built" "$IMAGE" "$("$FG_ROOT/deploy/build-image.sh" --print-image)"
check "the image holds no shell" bash -c "! ${PODMAN[*]} run --rm --network none --entrypoint /bin/sh $IMAGE -c true >/dev/null 2>&1"

# ---- a node: a namespace with a default route, an engine, a client ----
NS=fgt-img-n$$ NSC=fgt-img-c$$ IF=fgin$$ IFC=fgic$$ IF2=fgix$$ IF2C=fgiy$$
NODE_IP=198.18.30.1 CLIENT_IP=198.18.30.2
netns_add "$NS"
netns_add "$NSC"
veth_pair "$NS" "$IF" "$NSC" "$IFC"
veth_pair "$NS" "$IF2" "$NSC" "$IF2C"   # a second NIC without the default route
ip -n "$NS" addr add $NODE_IP/24 dev "$IF"
ip -n "$NSC" addr add $CLIENT_IP/24 dev "$IFC"
ip -n "$NS" addr add 198.18.31.1/24 dev "$IF2"
ip -n "$NSC" addr add 198.18.31.2/24 dev "$IF2C"
ip -n "$NS" route add default via $CLIENT_IP dev "$IF"

# The node's directories the DaemonSet mounts (hostPath), its ConfigMap and Secret.
declare -A HOSTDIR=([/sys/fs/bpf]=$TMP/node/sys/fs/bpf [/run/fairgate]=$TMP/node/run/fairgate
	[/var/lib/fairgate]=$TMP/node/var/lib/fairgate)
for d in "${HOSTDIR[@]}"; do mkdir -p "$d"; done
BPFFS=${HOSTDIR[/sys/fs/bpf]}
# a peer group of its own (a bind of a directory of / would join /'s)
mount --bind "$BPFFS" "$BPFFS" && mount --make-private "$BPFFS" && mount --make-shared "$BPFFS"
# (stacked: the runtime may bind it once more to share it with a container)
on_exit "for _ in 1 2 3 4; do mountpoint -q $BPFFS && umount -R $BPFFS; done"
declare -A VOLDIR
while read -r src; do
	VOLDIR[$src]=$TMP/volumes/${src//\//-}
	mkdir -p "${VOLDIR[$src]}"
	while read -r key; do
		jq -r --arg s "$src" --arg k "$key" '.files[$s][$k]' <<<"$POD" | kubelet_write "${VOLDIR[$src]}" "$key"
	done < <(jq -r --arg s "$src" '.files[$s] | keys[]' <<<"$POD")
done < <(jq -r '.files | keys[]' <<<"$POD")
# the metrics token the operator creates (daemonset.yaml's header): the
# manifests do not ship it, and the pod does not start without it
METRICS_TOKEN=$(head -c 32 /dev/urandom | base64)
VOLDIR[Secret/fairgate-metrics]=$TMP/volumes/Secret-fairgate-metrics
mkdir -p "${VOLDIR[Secret/fairgate-metrics]}"
printf %s "$METRICS_TOKEN" | kubelet_write "${VOLDIR[Secret/fairgate-metrics]}" token
POLICY_DIR=${VOLDIR[ConfigMap/fairgate-policy]} TENANTS_DIR=${VOLDIR[Secret/fairgate-tenants]}
KEY=sk-fairgate-example   # the Secret's documented example tenant

# fairgate-sim as the node's vLLM: the vLLM manifest's flags that mean
# something to the engine's behaviour, the policy's replica.
cat "$POLICY_DIR/policy.yaml" "$TENANTS_DIR/tenants.yaml" >"$TMP/sim-policy.yaml"
simflags=()
jq -e '.vllm_args | index("--enable-prompt-tokens-details")' <<<"$POD" >/dev/null && simflags+=(--enable-prompt-tokens-details)
sp=$(jq -r '.vllm_args as $a | ($a | index("--scheduling-policy")) as $i | if $i then $a[$i + 1] else "fcfs" end' <<<"$POD")
simflags+=(--scheduling-policy "$sp")
spawn "$TMP/sim.log" ip netns exec "$NS" "$FG_BUILD/fairgate-sim" --policy "$TMP/sim-policy.yaml" \
	--listen 0.0.0.0:8000 --speedup 0 "${simflags[@]}"
wait_port "$NS" 127.0.0.1 8000 10 || { tap_fail "fairgate-sim starts" "$(tail -3 "$TMP/sim.log")"; exit 1; }

# ---- the DaemonSet's settings, as podman flags ----
# Every securityContext field is mapped or the test fails: a setting the
# test ignored would not be "exactly the DaemonSet's".
security_flags() { # securityContext JSON
	local sc=$1 k
	for k in $(jq -r 'keys[]' <<<"$sc"); do
		case $k in
		privileged) [ "$(jq -r .privileged <<<"$sc")" = true ] && echo --privileged ;;
		allowPrivilegeEscalation) [ "$(jq -r .allowPrivilegeEscalation <<<"$sc")" = false ] && echo --security-opt=no-new-privileges ;;
		readOnlyRootFilesystem) [ "$(jq -r .readOnlyRootFilesystem <<<"$sc")" = true ] && printf '%s\n' --read-only --read-only-tmpfs=false ;;
		runAsUser) echo "--user=$(jq -r .runAsUser <<<"$sc")" ;;
		capabilities)
			jq -r '.capabilities.drop // [] | .[] | "--cap-drop=\(.)"' <<<"$sc"
			jq -r '.capabilities.add // [] | .[] | "--cap-add=\(.)"' <<<"$sc" ;;
		seccompProfile)
			case $(jq -r .seccompProfile.type <<<"$sc") in
			Unconfined) echo --security-opt=seccomp=unconfined ;;
			RuntimeDefault) ;;
			*) echo "unmapped seccompProfile" >&2; return 1 ;;
			esac ;;
		appArmorProfile) ;; # this kernel has no AppArmor: nothing to confine or unconfine
		*) echo "the test does not map securityContext.$k to podman" >&2; return 1 ;;
		esac
	done
}
mount_flags() { # mounts JSON
	local m
	while read -r m; do
		local path src prop ro opt
		path=$(jq -r .mountPath <<<"$m") prop=$(jq -r .propagation <<<"$m") ro=$(jq -r .readOnly <<<"$m")
		if [ "$(jq -r '.hostPath // empty' <<<"$m")" ]; then
			src=${HOSTDIR[$(jq -r .hostPath <<<"$m")]:-}
		elif [ "$(jq -r '.configMap // empty' <<<"$m")" ]; then
			src=${VOLDIR[ConfigMap/$(jq -r .configMap <<<"$m")]:-}
		elif [ "$(jq -r '.secret // empty' <<<"$m")" ]; then
			src=${VOLDIR[Secret/$(jq -r .secret <<<"$m")]:-}
			# an optional Secret the manifests do not ship (agent.fleet's
			# password): the kubelet mounts it empty until it exists
			if [ -z "$src" ] && [ "$(jq -r .optional <<<"$m")" = true ]; then
				src=$TMP/volumes/optional-$(jq -r .secret <<<"$m")
				mkdir -p "$src"
			fi
		fi
		[ -n "${src:-}" ] || { echo "the test has no node directory for $m" >&2; return 1; }
		case $prop in
		HostToContainer) opt=rslave ;; Bidirectional) opt=rshared ;; None) opt=rprivate ;;
		*) echo "unmapped propagation $prop" >&2; return 1 ;;
		esac
		[ "$ro" = true ] && opt=$opt,ro
		echo "--volume=$src:$path:$opt"
	done < <(jq -c '.[]' <<<"$1")
}
# This sandbox may not raise limits (no CAP_SYS_RESOURCE), and podman's
# default nofile for root is above them: give the container what we have.
ULIMITS=(--ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit "nproc=4096:4096")
NET=(--network "ns:/run/netns/$NS")

# ---- the init container: bpffs on the node's /sys/fs/bpf ----
init=$(jq -c '.init[] | select(.argv | index("--mount-bpffs"))' <<<"$POD")
initflags=()
mapfile -t initflags < <(mount_flags "$(jq -c .mounts <<<"$init")")
[ "$(jq -r .privileged <<<"$init")" = true ] && initflags+=(--privileged)
out=$("${PODMAN[@]}" run --rm "${NET[@]}" "${ULIMITS[@]}" "${initflags[@]}" \
	--entrypoint "$(jq -r '.argv[0]' <<<"$init")" "$IMAGE" $(jq -r '.argv[1:][]' <<<"$init") 2>&1)
check "init container: '$out'" grep -q "mounted bpffs at /sys/fs/bpf" <<<"$out"
expect_eq "... and the node sees a bpffs there (Bidirectional)" "$(stat -f -c %T "$BPFFS")" bpf_fs

# ---- the agent ----
flags=()
mapfile -t flags < <(security_flags "$(jq -c .securityContext <<<"$POD")") ||
	{ tap_fail "the DaemonSet's securityContext maps to podman" "$(security_flags "$(jq -c .securityContext <<<"$POD")" 2>&1 >/dev/null)"; exit 1; }
mapfile -t -O ${#flags[@]} flags < <(mount_flags "$(jq -c .mounts <<<"$POD")")
mem=$(jq -r '.resources.limits.memory // empty' <<<"$POD")
[ -n "$mem" ] && flags+=(--memory "$(sed 's/Mi$/m/; s/Gi$/g/' <<<"$mem")")
while read -r e; do flags+=(--env "$e"); done < <(jq -r --arg ip $NODE_IP \
	'.env[] | "\(.name)=\(if .valueFrom.fieldRef.fieldPath == "status.hostIP" then $ip else .value end)"' <<<"$POD")
args=()
while read -r a; do args+=("${a//\$(NODE_IP)/$NODE_IP}"); done < <(jq -r '.argv[1:][]' <<<"$POD")
NAME=fgt-img-$$
on_exit "${PODMAN[*]} rm -f -t 0 $NAME"
[ "$BIN" = "$FG_BUILD" ] && flags+=(--env ASAN_OPTIONS=detect_leaks=0) # a sanitizer build without ptrace
echo "# podman run ${flags[*]} $IMAGE ${args[*]}"

# in_pod CMD... — run in the container, as the kubelet runs a probe
in_pod() { "${PODMAN[@]}" exec "$NAME" "$@"; }
# wait_ready — the readiness probe, as the kubelet would poll it
wait_ready() {
	local probe
	mapfile -t probe < <(jq -r '.readiness[]' <<<"$POD")
	for _ in $(seq 100); do
		in_pod "${probe[@]}" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	return 1
}
logs() { "${PODMAN[@]}" logs "$NAME" 2>&1; }

"${PODMAN[@]}" run -d --name "$NAME" "${NET[@]}" "${ULIMITS[@]}" "${flags[@]}" \
	--entrypoint "$(jq -r '.argv[0]' <<<"$POD")" "$IMAGE" "${args[@]}" >/dev/null 2>"$TMP/run.err" ||
	{ tap_fail "the agent container starts" "$(cat "$TMP/run.err")"; exit 1; }
check "the agent is ready (its readiness probe passes)" wait_ready || { logs | sed 's/^/#   /'; exit 1; }
check "gate attached to the default route's interface $IF (interfaces: auto)" \
	grep -q "gate attached to $IF (native)" <<<"$(logs)"
logs >"$TMP/agent.log"
check "... and not to the other NIC" bash -c '! grep -q "gate attached to $1" "$2"' _ "$IF2" "$TMP/agent.log"
check "steer attached" grep -q "steer attached" <<<"$(logs)"
mapfile -t live < <(jq -r '.liveness[]' <<<"$POD")
check "the liveness probe passes in the container" quiet in_pod "${live[@]}"
check "the policy's tenants came from the Secret" grep -q "running with 1 tenants" <<<"$(logs)"

# ---- a tenant's request, through steer and fairgated to the engine ----
chat() { # KEY -> HTTP code and the reply in $TMP/reply
	ip netns exec "$NSC" curl -sS -o "$TMP/reply" -w '%{http_code}' --max-time 10 \
		"http://$NODE_IP:8000/v1/chat/completions" -H "Authorization: Bearer $1" \
		-H 'Content-Type: application/json' \
		-d '{"messages":[{"role":"user","content":"hello from the image test"}],"max_tokens":8}'
}
expect_eq "the example tenant's request is served" "$(chat $KEY)" 200
check "... by the engine (a completion with usage)" quiet jq -e '.usage.completion_tokens > 0' "$TMP/reply"
expect_eq "a request without a key is refused by fairgated" "$(chat '')" 401
check "... in OpenAI's error shape" quiet jq -e '.error.message and .error.type' "$TMP/reply"
scrape() { # [TOKEN] -> the HTTP code of a scrape of the node address from the client
	ip netns exec "$NSC" curl -s -o "$TMP/metrics" -w '%{http_code}' --max-time 5 \
		${1:+-H "Authorization: Bearer $1"} "http://$NODE_IP:9464/metrics"
}
expect_eq "metrics on the node address answer the Secret's token" "$(scrape "$METRICS_TOKEN")" 200
check "... with the tenants' series" grep -q 'tenant="example"' "$TMP/metrics"
expect_eq "... and nothing without it" "$(scrape)" 401
check "... (not a tenant's name in the 401)" bash -c '! grep -q example "$1"' _ "$TMP/metrics"
expect_eq "... nor with another token" "$(scrape sk-fairgate-example)" 401
code=$(ip netns exec "$NS" curl -s -o /dev/null -w '%{http_code}' --max-time 5 http://127.0.0.1:9464/metrics)
expect_eq "... and not on loopback (nor anywhere else)" "$code" 000
# Prometheus itself, with deploy/prometheus-scrape.yaml's job (its discovery
# made the node's static address) and the token as a file, from the client
# side, as a central Prometheus scrapes the node
if command -v prometheus >/dev/null; then
	printf %s "$METRICS_TOKEN" >"$TMP/prom-token"
	prometheus_static_config "$NODE_IP:9464" "$TMP/prom-token" >"$TMP/prometheus.yaml"
	spawn "$TMP/prometheus.log" ip netns exec "$NSC" prometheus --config.file "$TMP/prometheus.yaml" \
		--storage.tsdb.path "$TMP/prom-data" --web.listen-address 127.0.0.1:9090
	for _ in $(seq 100); do
		up=$(ip netns exec "$NSC" curl -sG --max-time 2 http://127.0.0.1:9090/api/v1/query --data-urlencode 'query=up{job="fairgate"}' |
			jq -r '.data.result[0].value[1] // empty' 2>/dev/null)
		[ "$up" = 1 ] && break
		sleep 0.2
	done
	expect_eq "Prometheus scrapes the node with deploy/prometheus-scrape.yaml's job: up{job=\"fairgate\"}" "${up:-none}" 1
	n=$(ip netns exec "$NSC" curl -sG --max-time 2 http://127.0.0.1:9090/api/v1/query --data-urlencode query=fairgate_tenant_units_total |
		jq -r '[.data.result[].metric.tenant] | join(",")')
	expect_eq "... and stores the tenants' series" "$n" example
	printf 'not-the-token' >"$TMP/prom-token"   # Prometheus re-reads it each scrape
	for _ in $(seq 100); do
		err=$(ip netns exec "$NSC" curl -s --max-time 2 http://127.0.0.1:9090/api/v1/targets |
			jq -r '.data.activeTargets[0] | select(.health == "down") | .lastError')
		[ -n "$err" ] && break
		sleep 0.2
	done
	check "... with a wrong token its target is down: $err" grep -q 401 <<<"$err"
	kill -TERM "$SPAWNED_PID"
else
	tap_skip "Prometheus scrapes the node" "prometheus is not installed (make deps installs it)"
fi
check "bpftool on the host reads the tenant by name" \
	bash -c "bpftool map dump pinned '$BPFFS/fairgate/tenants' | grep -q '\"name\": \"example\"'"

# ---- deny windows survive a restart and a crash ----
deny_until() { bpftool -j map dump pinned "$BPFFS/fairgate/tenants" |
	jq -r '.[] | .formatted.value // .value | select(.name == "example") | .deny_until_ns'; }
in_pod /usr/local/bin/fairgatectl tenant deny example --mode delay --for 10m >/dev/null
until0=$(deny_until)
check "an operator's deny window is in the pinned map ($until0)" test "${until0:-0}" -gt 0
"${PODMAN[@]}" restart -t 10 "$NAME" >/dev/null
check "restarted (SIGTERM, start): ready again" wait_ready
expect_eq "... the deny window is the same" "$(deny_until)" "$until0"
check "... and fairgated reads it" bash -c "${PODMAN[*]} exec $NAME /usr/local/bin/fairgatectl tenant show example | grep -qi 'delay'"
"${PODMAN[@]}" kill -s KILL "$NAME" >/dev/null
"${PODMAN[@]}" wait "$NAME" >/dev/null 2>&1
check "killed: its gate stays attached" bash -c "ip -n $NS link show $IF | grep -q 'prog/xdp'"
"${PODMAN[@]}" start "$NAME" >/dev/null
check "restarted after SIGKILL: ready again" wait_ready
check "... it replaced the dead agent's gate without CAP_SYS_ADMIN" \
	bash -c "[ \$(${PODMAN[*]} logs $NAME 2>&1 | grep -c 'gate attached to $IF') -ge 3 ] && ! ${PODMAN[*]} logs $NAME 2>&1 | grep -q 'already attached'"
expect_eq "... the deny window is the same" "$(deny_until)" "$until0"
syn() { in_pod /usr/local/bin/fairgatectl tenant show example --json |
	jq "[.. | objects | .$1? // empty | numbers] | add // 0"; }
delayed0=$(syn syn_delayed)
res=$(ip netns exec "$NSC" "$FG_BUILD/fg-tcpprobe" connect $NODE_IP 8000 --timeout-ms 300 --count 6 | tail -1)
delayed1=$(syn syn_delayed)
check "... and gate delays the tenant's SYNs past the allowance ($res; delayed $delayed0 -> $delayed1)" \
	test "$delayed1" -gt "$delayed0"
in_pod /usr/local/bin/fairgatectl tenant allow example >/dev/null

# ---- the Secret edited: applied without exec, a broken edit changes nothing ----
printf '%s' "$(cat "$TENANTS_DIR/tenants.yaml")" >"$TMP/tenants.yaml"
cat >>"$TMP/tenants.yaml" <<EOF

  - name: second
    tier: standard
    units_per_s: 500
    keys: ["sha256:$(printf %s sk-second | sha256sum | cut -d' ' -f1)"]
EOF
kubelet_write "$TENANTS_DIR" tenants.yaml <"$TMP/tenants.yaml"
ntenants() { in_pod /usr/local/bin/fairgatectl status --json | jq .tenant_count; }
for _ in $(seq 50); do [ "$(ntenants)" = 2 ] && break; sleep 0.1; done
expect_eq "a Secret edit adds a tenant, no exec" "$(ntenants)" 2
expect_eq "... whose key is served" "$(chat sk-second)" 200
sed 's/tier: standard/tier: gold/' "$TMP/tenants.yaml" | kubelet_write "$TENANTS_DIR" tenants.yaml
for _ in $(seq 50); do
	[ "$(in_pod /usr/local/bin/fairgatectl status --json | jq .policy_watch.refused)" = 1 ] && break
	sleep 0.1
done
st=$(in_pod /usr/local/bin/fairgatectl status --json)
check "a broken edit is refused ($(jq -r .policy_watch.last_result <<<"$st"))" \
	quiet jq -e '.policy_watch.refused == 1 and (.policy_watch.last_result | test("unknown tier .gold."))' <<<"$st"
expect_eq "... and changes nothing" "$(chat sk-second)" 200

# ---- stopped: gate detached, pins kept ----
"${PODMAN[@]}" stop -t 10 "$NAME" >/dev/null
expect_eq "stopped: exit 0" "$("${PODMAN[@]}" inspect -f '{{.State.ExitCode}}' "$NAME")" 0
check "... gate detached" bash -c "! ip -n $NS link show $IF | grep -q 'prog/xdp'"
check "... the maps stay pinned, the program's pin is gone" \
	test -e "$BPFFS/fairgate/tenants" -a ! -e "$BPFFS/fairgate/gate_prog"
exit 0
