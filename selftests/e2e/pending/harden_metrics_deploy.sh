#!/usr/bin/env bash
# harden_metrics_deploy.sh — issue #15 case 5, the deployment half: the
# shipped DaemonSet does not serve unauthenticated metrics on the node's
# address (either it keeps them node-local, or its policy sets
# agent.metrics_token_file). Split from harden_metrics.sh, whose agent half
# passes; this half still fails: the DaemonSet binds --metrics-address
# $(NODE_IP) with no token.
source "$(dirname "$0")/harden_env.inc"

# the shipped DaemonSet: metrics on the node's address only with a token
ds=$FG_ROOT/deploy/daemonset.yaml
if grep -q -- '--metrics-address' "$ds"; then
	check "deploy/daemonset.yaml binds metrics on the node's address, so its policy sets agent.metrics_token_file" \
		grep -q 'metrics_token_file:' "$ds"
else
	check "deploy/daemonset.yaml keeps metrics node-local (127.0.0.1)" grep -q 'metrics_listen: 127.0.0.1' "$ds"
fi
