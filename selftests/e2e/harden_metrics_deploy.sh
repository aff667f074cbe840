#!/usr/bin/env bash
# harden_metrics_deploy.sh — issue #15 case 5, the deployment half: the
# shipped DaemonSet does not serve unauthenticated metrics on the node's
# address (either it keeps them node-local, or its policy sets
# agent.metrics_token_file, from a Secret the pod cannot start without).
# The agent half is harden_metrics.sh; deploy_image.sh runs the DaemonSet's
# container and has Prometheus scrape it with the token.
source "$(dirname "$0")/harden_env.inc"

# the shipped DaemonSet: metrics on the node's address only with a token
ds=$FG_ROOT/deploy/daemonset.yaml
if grep -q -- '--metrics-address' "$ds"; then
	check "deploy/daemonset.yaml binds metrics on the node's address, so its policy sets agent.metrics_token_file" \
		grep -q '^      metrics_token_file: /etc/fairgate/metrics/token$' "$ds"
	check "... which a Secret that is not optional mounts" \
		grep -q '^        - {name: metrics-token, secret: {secretName: fairgate-metrics, defaultMode: 256}}$' "$ds"
	check "... at the token's directory" \
		grep -q '^            - {name: metrics-token, mountPath: /etc/fairgate/metrics, readOnly: true}$' "$ds"
else
	check "deploy/daemonset.yaml keeps metrics node-local (127.0.0.1)" grep -q 'metrics_listen: 127.0.0.1' "$ds"
fi
