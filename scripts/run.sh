#!/usr/bin/env bash
# The main job behind `make run`: apply the project's CRDs (crds/*.yaml) to the
# cluster in $KUBECONFIG and run the operator with ./watches.yaml in the
# foreground (Ctrl-C stops it). The Makefile has set KUBECONFIG (to the local
# testbed's when it was unset) and put .venv/bin first on PATH.
# Extra flags for `ansible-operator run` can be given in RUN_ARGS.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${KUBECONFIG:?KUBECONFIG must be set (make run sets it)}"
kubectl=kubectl
testbed_kubectl="${TESTBED_CACHE:-$HOME/.cache/ansible-operator-testbed}/bin/kubectl"
[ -x "$testbed_kubectl" ] && kubectl=$testbed_kubectl
server=$("$kubectl" config view --minify -o jsonpath='{.clusters[0].cluster.server}')
echo "cluster: $server (KUBECONFIG=$KUBECONFIG)"
if [ ! -f watches.yaml ]; then
  echo "make run: no watches.yaml in $(pwd)" >&2
  exit 1
fi
ansible-operator validate --watches-file=./watches.yaml
shopt -s nullglob
crds=(crds/*.yaml crds/*.yml)
if [ ${#crds[@]} -gt 0 ]; then
  "$kubectl" apply $(printf -- '-f %s ' "${crds[@]}")
fi
echo "running the operator; stop it with Ctrl-C"
# shellcheck disable=SC2086
exec ansible-operator run --watches-file=./watches.yaml ${RUN_ARGS:-}
