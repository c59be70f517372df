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
if [ -f crds/kustomization.yaml ]; then
  # The kustomization lists the CRDs (and is not itself an object to apply).
  "$kubectl" apply -k crds
else
  crds=(crds/*.yaml crds/*.yml)
  if [ ${#crds[@]} -gt 0 ]; then
    "$kubectl" apply $(printf -- '-f %s ' "${crds[@]}")
  fi
fi
echo "running the operator; stop it with Ctrl-C"
# The operator runs in a process group of its own (set -m), and this shell
# hands it Ctrl-C (SIGINT) and SIGTERM once each, waits until it has stopped
# and says how it ended. (make itself still reports "Interrupt" after Ctrl-C:
# it always does when a recipe is interrupted.)
set -m
# shellcheck disable=SC2086
ansible-operator run --watches-file=./watches.yaml ${RUN_ARGS:-} &
pid=$!
trap 'kill -INT "$pid" 2>/dev/null || true' INT
trap 'kill -TERM "$pid" 2>/dev/null || true' TERM
while :; do
  rc=0
  wait "$pid" || rc=$?
  # A trapped signal ends `wait` early (status > 128) while the operator
  # is still shutting down: wait again until it is gone.
  kill -0 "$pid" 2>/dev/null || break
done
echo "ansible-operator stopped with exit code $rc"
exit "$rc"
