#!/usr/bin/env bash
# deploy_files.sh — what deploy/ ships stays valid, and the check can fail:
# every manifest object passes the Kubernetes API schema of its kind with no
# unknown field, and fairgate's rules (selftests/tools/manifest-check): the
# ConfigMap's policy with the Secret's tenants passes `fairgatectl policy
# check`, the agent's capabilities and the systemd unit's are exactly
# `fairgated --capabilities`, the image is deploy/build-image.sh's and never
# pulled, metrics bind the node address behind a bearer token from a Secret
# (or stay node-local), bpffs and the control socket come
# from the node, the probes mean something, and vLLM runs as the policy
# assumes. Then one broken copy per rule, each refused with its reason;
# the example policies pass policy check; and deploy/prometheus-scrape.yaml
# passes promtool (its Kubernetes discovery aside: Debian's Prometheus is
# built without it).
source "$(dirname "$0")/deploy_env.inc"
ctl=$FG_BUILD/fairgatectl
tmp=$(mktemp -d); on_exit "rm -rf $tmp"

for f in "$FG_ROOT"/examples/*.yaml "$FG_ROOT"/examples/*.json; do
	check "example $(basename "$f") passes policy check" "$ctl" policy check "$f"
done
help=$("$FG_BUILD/fairgated" --help 2>&1)
for flag in --policy --tenants --metrics-address --mount-bpffs --capabilities; do
	check "fairgated takes $flag" grep -q -- "$flag" <<<"$help"
done
caps=$("$FG_BUILD/fairgated" --capabilities | cut -f1 | tr '\n' ' ')
expect_eq "fairgated --capabilities" "$caps" "CAP_BPF CAP_NET_ADMIN CAP_PERFMON "

need_manifest_checker "the manifests against the Kubernetes API schema"
out=$(manifest_check "${MANIFESTS[@]}" 2>&1); rc=$?
check "the shipped manifests pass the schema and the rules ($out)" test $rc -eq 0

# the fleet block the ConfigMap ships commented out is valid once uncommented
rm -rf "$tmp/d"; cp -r "$FG_ROOT/deploy" "$tmp/d"
sed -i 's/^      #fleet:/      fleet:/; s/^      #  \([a-z_]*:\)/        \1/' "$tmp/d/daemonset.yaml"
check "the ConfigMap's agent.fleet block is there to uncomment" grep -q '^      fleet:' "$tmp/d/daemonset.yaml"
out=$(manifest_check "$tmp/d/daemonset.yaml" "$tmp/d/vllm.yaml" "$tmp/d/redis.yaml" 2>&1); rc=$?
check "with agent.fleet uncommented the manifests still pass ($out)" test $rc -eq 0
check "uncommented, agent.fleet points at deploy/redis.yaml's Service" \
	grep -q '^        redis: fairgate-redis.fairgate.svc.cluster.local:6379' "$tmp/d/daemonset.yaml"

# node-local metrics are the other way the checker accepts
rm -rf "$tmp/d"; cp -r "$FG_ROOT/deploy" "$tmp/d"
sed -i 's|"/etc/fairgate/tenants/tenants.yaml",|"/etc/fairgate/tenants/tenants.yaml"]|; /"--metrics-address", "$(NODE_IP)"\]/d' "$tmp/d/daemonset.yaml"
check "the copy's agent has no --metrics-address" bash -c '! grep -qF -- "\"--metrics-address\"" "$1"' _ "$tmp/d/daemonset.yaml"
out=$(manifest_check "$tmp/d/daemonset.yaml" "$tmp/d/vllm.yaml" "$tmp/d/redis.yaml" 2>&1); rc=$?
check "without --metrics-address (metrics on the node's loopback) the manifests pass ($out)" test $rc -eq 0

# the Prometheus job: valid for promtool once its discovery is a static
# target (prometheus_static_config, deploy_env.inc)
if command -v promtool >/dev/null; then
	echo sk-metrics-test >"$tmp/token"
	prometheus_static_config 198.18.0.1:9464 "$tmp/token" >"$tmp/prometheus.yaml"
	out=$(promtool check config "$tmp/prometheus.yaml" 2>&1); rc=$?
	check "deploy/prometheus-scrape.yaml passes promtool check config ($(tail -1 <<<"$out"))" test $rc -eq 0
	check "... and scrapes with the bearer token from credentials_file" \
		grep -q "credentials_file: $tmp/token" "$tmp/prometheus.yaml"
else
	tap_skip "deploy/prometheus-scrape.yaml passes promtool" "promtool is not installed (make deps installs prometheus)"
fi

# broken NAME FILE SED WANT — a copy of deploy/ with one edit; the checker
# must refuse it (exit 1) with a line matching WANT.
broken() {
	local name=$1 file=$2 edit=$3 want=$4 out rc
	rm -rf "$tmp/d"
	cp -r "$FG_ROOT/deploy" "$tmp/d"
	sed -i "$edit" "$tmp/d/$file"
	if cmp -s "$FG_ROOT/deploy/$file" "$tmp/d/$file"; then
		tap_fail "broken: $name" "the edit '$edit' changed nothing in $file"
		return
	fi
	out=$(FG_UNIT=$tmp/d/fairgate.service manifest_check "$tmp/d/daemonset.yaml" "$tmp/d/vllm.yaml" "$tmp/d/redis.yaml" 2>&1); rc=$?
	if [ $rc -eq 1 ] && grep -qE -- "$want" <<<"$out"; then
		tap_ok "broken: $name is refused: $(grep -m1 -E -- "$want" <<<"$out")"
	else
		tap_fail "broken: $name is refused" "rc=$rc, want /$want/ in: $out"
	fi
}

# the API schema
broken "an unknown field (a typo)" daemonset.yaml 's/mountPropagation: HostToContainer/mountPropogation: HostToContainer/' \
	'DaemonSet/fairgate: .*/mountPropogation: unknown field'
broken "a string where the schema wants an integer" daemonset.yaml 's/terminationGracePeriodSeconds: 30/terminationGracePeriodSeconds: "30"/' \
	'terminationGracePeriodSeconds must be integer'
broken "a value outside an enum" daemonset.yaml '0,/imagePullPolicy: IfNotPresent/s//imagePullPolicy: IfNotPresnt/' \
	'imagePullPolicy must be one of Always, IfNotPresent, Never'
broken "a missing required field" daemonset.yaml '/- name: fairgated$/s/- name: fairgated/- stdin: false/' \
	"containers/0 must have required property 'name'"
broken "a kind without a schema" daemonset.yaml 's/^kind: Namespace/kind: Namespcae/' \
	'no API schema for v1 Namespcae'
broken "a file that is not YAML" daemonset.yaml '0,/^  name: fairgate$/s//\tname: fairgate/' \
	'daemonset.yaml: not YAML'
# fairgate's rules
broken "a capability fairgated does not ask for" daemonset.yaml 's/add: \[BPF, NET_ADMIN, PERFMON\]/add: [BPF, NET_ADMIN, PERFMON, SYS_ADMIN]/' \
	'capabilities.add \[BPF,NET_ADMIN,PERFMON,SYS_ADMIN\] != fairgated --capabilities \[BPF,NET_ADMIN,PERFMON\]'
broken "one it needs left out" daemonset.yaml 's/add: \[BPF, NET_ADMIN, PERFMON\]/add: [BPF, NET_ADMIN]/' \
	'capabilities.add \[BPF,NET_ADMIN\] != fairgated'
broken "a privileged agent" daemonset.yaml '0,/privileged: false/s//privileged: true/' \
	'the agent must not be privileged'
broken "the runtime's default seccomp profile" daemonset.yaml 's/seccompProfile: {type: Unconfined}/seccompProfile: {type: RuntimeDefault}/' \
	'seccompProfile must be Unconfined'
broken "an invalid policy in the ConfigMap" daemonset.yaml 's/interfaces: auto/interfaces: automatic/' \
	'policy check: ConfigMap fairgate-policy policy.yaml:[0-9]+:[0-9]+: agent.interfaces must be auto or a list'
broken "a tenant of no tier in the Secret" daemonset.yaml 's/tier: standard/tier: gold/' \
	"policy check: Secret fairgate-tenants tenants.yaml:[0-9]+:[0-9]+: tenants\[0\].tier: unknown tier 'gold'"
broken "--tenants naming a key the Secret lacks" daemonset.yaml 's|/etc/fairgate/tenants/tenants.yaml|/etc/fairgate/tenants/tenant.yaml|' \
	'no key tenant.yaml in Secret fairgate-tenants'
broken "an image the build does not make" daemonset.yaml '0,/image: localhost\/fairgate:0.1/s//image: fairgate:latest/' \
	'runs fairgate:latest, not localhost/fairgate:0.1'
broken "an image that would be pulled" daemonset.yaml '0,/imagePullPolicy: IfNotPresent/s//imagePullPolicy: Always/' \
	'imagePullPolicy Always, want IfNotPresent'
broken "metrics on every address" daemonset.yaml 's/"--metrics-address", "$(NODE_IP)"/"--metrics-address", "0.0.0.0"/' \
	'metrics must bind the node address'
broken "metrics on the node address without a token" daemonset.yaml '/^      metrics_token_file:/d' \
	'metrics on the node address need agent.metrics_token_file'
broken "the metrics token in a ConfigMap" daemonset.yaml 's|metrics_token_file: /etc/fairgate/metrics/token|metrics_token_file: /etc/fairgate/policy/token|' \
	'agent.metrics_token_file /etc/fairgate/policy/token must come from a Secret volume'
broken "the metrics token's Secret optional" daemonset.yaml 's/secretName: fairgate-metrics, defaultMode/secretName: fairgate-metrics, optional: true, defaultMode/' \
	'Secret fairgate-metrics must not be optional'
broken "metrics on every address of the host network" daemonset.yaml 's|"/etc/fairgate/tenants/tenants.yaml",|"/etc/fairgate/tenants/tenants.yaml"]|; /"--metrics-address", "$(NODE_IP)"\]/d; s/metrics_listen: 127.0.0.1:9464/metrics_listen: 0.0.0.0:9464/' \
	'metrics on 0.0.0.0:9464: keep agent.metrics_listen on loopback'
broken "Bidirectional propagation on the agent" daemonset.yaml 's/mountPropagation: HostToContainer/mountPropagation: Bidirectional/' \
	'want HostToContainer'
broken "no init container to mount bpffs" daemonset.yaml 's/"--mount-bpffs"/"--help"/' \
	'privileged init container must run fairgated --mount-bpffs'
broken "a readiness probe that is the liveness one" daemonset.yaml 's/"health", "--ready", "--timeout"/"health", "--timeout"/' \
	'readinessProbe must be `fairgatectl health --ready`'
broken "no memory limit" daemonset.yaml 's/limits: {memory: 256Mi}/limits: {cpu: "1"}/' \
	'limits.memory must be set'
broken "vLLM off the host network" vllm.yaml 's/hostNetwork: true/hostNetwork: false/' \
	'vLLM must run with hostNetwork'
broken "vLLM on a port fairgate does not protect" vllm.yaml 's/"--port", "8000"/"--port", "8010"/' \
	"vLLM's --port 8010 is not a protected port"
broken "vLLM without prompt token details" vllm.yaml '/"--enable-prompt-tokens-details",/d' \
	'needs --enable-prompt-tokens-details'
broken "vLLM scheduling apart from the policy" vllm.yaml 's/"--scheduling-policy", "priority"/"--scheduling-policy", "fcfs"/' \
	'--scheduling-policy fcfs but the policy says agent.engine_scheduling: priority'
broken "vLLM with an API key" vllm.yaml 's/"--enable-prompt-tokens-details",/"--enable-prompt-tokens-details", "--api-key", "s3cret",/' \
	'no --api-key'
broken "the systemd unit with CAP_SYS_ADMIN again" fairgate.service 's/^AmbientCapabilities=.*/& CAP_SYS_ADMIN/' \
	'AmbientCapabilities=CAP_BPF CAP_NET_ADMIN CAP_PERFMON CAP_SYS_ADMIN != fairgated --capabilities'
broken "redis.yaml is checked too: a Deployment's field in its StatefulSet" redis.yaml 's/^  serviceName: fairgate-redis/  minReadySeconds: 0\n  strategy: {type: Recreate}/' \
	'StatefulSet/fairgate-redis: .*/strategy: unknown field'
exit 0
