#!/usr/bin/env bash
# The main job behind `make run`: show which cluster we talk to, and (once the
# controller exists) apply crds/ and run the operator with ./watches.yaml.
# The Makefile has already set KUBECONFIG (to the testbed's when it was unset)
# and put .venv/bin first on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${KUBECONFIG:?KUBECONFIG must be set (make run sets it)}"
kubectl=kubectl
testbed_kubectl="${TESTBED_CACHE:-$HOME/.cache/ansible-operator-testbed}/bin/kubectl"
[ -x "$testbed_kubectl" ] && kubectl=$testbed_kubectl
server=$("$kubectl" config view --minify -o jsonpath='{.clusters[0].cluster.server}')
echo "cluster: $server (KUBECONFIG=$KUBECONFIG)"
"$kubectl" get nodes -o wide
echo
echo "The cluster is up. Reach it with:"
echo "  export KUBECONFIG=$KUBECONFIG"
echo "  $kubectl get nodes"
echo "Stop the local testbed with: make testbed-down"
