#!/usr/bin/env bash
# Build the testbed's control-plane binaries from the Go module proxy.
#
# Called by `make testbed-build` (and so by `make test` / `make run`). Builds
# kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, etcd and
# kwok at the versions pinned in testbed/versions.env, into a cache outside the
# repository ($TESTBED_CACHE, default ~/.cache/ansible-operator-testbed). Each
# component is rebuilt only when its stamp file is missing, i.e. on the first
# run on a machine or after a pin changes. Nothing built here is committed.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"

cache=${TESTBED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ansible-operator-testbed}
bin="$cache/bin"
mkdir -p "$bin"

# A module that wants a newer Go than the installed one must fail loudly here,
# not silently download a toolchain.
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false

log() { printf '[testbed-build] %s\n' "$*" >&2; }

stamp_ok() { [ -f "$cache/stamps/$1" ] && [ "$(cat "$cache/stamps/$1")" = "$2" ]; }
stamp_set() { mkdir -p "$cache/stamps"; printf '%s' "$2" >"$cache/stamps/$1"; }

build_kubernetes() {
  local kv=$KUBERNETES_VERSION
  if stamp_ok kubernetes "$kv"; then return; fi
  local sv="v0.${kv#v1.}" minor="${kv#v1.}"; minor=${minor%%.*}
  local w="$cache/src/kubernetes-$kv"
  mkdir -p "$w"
  log "building Kubernetes $kv (first build on this machine takes 10-30 minutes)"
  (
    cd "$w"
    [ -f go.mod ] || go mod init testbed.local/k8sbins >/dev/null 2>&1
    local meta upmod commit m
    meta=$(go list -m -json "k8s.io/kubernetes@$kv")
    upmod=$(printf '%s' "$meta" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
    commit=$(printf '%s' "$meta" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("Origin", {}).get("Hash", "unknown"))')
    # k8s.io/kubernetes requires its staging modules at v0.0.0 and maps them to
    # ./staging; as a dependency those replaces are ignored, so map each one to
    # its published tag. The list comes from the tag's own go.mod.
    for m in $(sed -n 's#^[[:space:]]*\(k8s\.io/[A-Za-z0-9._-]*\) => \./staging/.*#\1#p' "$upmod"); do
      go mod edit -replace="$m=$m@$sv"
    done
    go get -tool \
      "k8s.io/kubernetes/cmd/kube-apiserver@$kv" \
      "k8s.io/kubernetes/cmd/kube-controller-manager@$kv" \
      "k8s.io/kubernetes/cmd/kube-scheduler@$kv" \
      "k8s.io/kubernetes/cmd/kubectl@$kv"
    # Stamp the version the way upstream's release build does, so /version,
    # kubectl and client version gates see the real release.
    local ld="-s -w" p now
    now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
    for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ld="$ld -X $p.gitVersion=$kv -X $p.gitMajor=1 -X $p.gitMinor=$minor"
      ld="$ld -X $p.gitCommit=$commit -X $p.gitTreeState=clean -X $p.buildDate=$now"
    done
    go build -trimpath -ldflags "$ld" -o "$bin/" \
      k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
      k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
  )
  stamp_set kubernetes "$kv"
}

build_etcd() {
  local ev=$ETCD_VERSION
  if stamp_ok etcd "$ev"; then return; fi
  local w="$cache/src/etcd-$ev"
  mkdir -p "$w"
  log "building etcd $ev"
  (
    cd "$w"
    [ -f go.mod ] || go mod init testbed.local/etcdbin >/dev/null 2>&1
    # The server module's own go.mod replaces its siblings with ../ paths, so
    # `go install` refuses it; as a dependency its requires already name tags.
    go get -tool "go.etcd.io/etcd/server/v3@$ev"
    go build -trimpath -ldflags "-s -w" -o "$bin/etcd" go.etcd.io/etcd/server/v3
  )
  stamp_set etcd "$ev"
}

build_kwok() {
  local kw=$KWOK_VERSION
  if stamp_ok kwok "$kw"; then return; fi
  log "building kwok $kw"
  GOBIN="$bin" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$kw"
  stamp_set kwok "$kw"
}

case "${1:-all}" in
  all) build_etcd; build_kwok; build_kubernetes ;;
  kubernetes) build_kubernetes ;;
  etcd) build_etcd ;;
  kwok) build_kwok ;;
  path) ;;
  *) echo "usage: $0 [all|kubernetes|etcd|kwok|path]" >&2; exit 2 ;;
esac
printf '%s\n' "$bin"
