#!/usr/bin/env bash
# Build the testbed's control-plane binaries from the Go module proxy.
#
# Called by `make testbed-build` (and so by `make test` / `make run`). Builds
# kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, etcd and
# kwok at the versions pinned in testbed/versions.env, into a cache outside the
# repository ($TESTBED_CACHE, default ~/.cache/ansible-operator-testbed). A
# binary is rebuilt when its component's stamp names another version (first
# run on a machine, or a pin changed) or when the binary no longer matches the
# size and sha256 recorded when it was built: a cache copied or restored with
# a damaged file (seen: kube-apiserver cut at 100 MiB, which then dies of
# SIGSEGV before printing a line) is repaired, not run. Nothing built here is
# committed.
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

# Each binary's size and sha256 as recorded after its build: stamps/<name>.sum.
record() { mkdir -p "$cache/stamps"; local b; for b in "$@"; do
  printf '%s %s\n' "$(stat -c %s "$bin/$b")" "$(sha256sum "$bin/$b" | cut -d' ' -f1)" >"$cache/stamps/$b.sum"
done; }
intact() {
  local b=$1 size
  [ -x "$bin/$b" ] && [ -f "$cache/stamps/$b.sum" ] || return 1
  size=$(stat -c %s "$bin/$b")
  # The size is checked first: it is free and catches truncation.
  [ "$size" = "$(cut -d' ' -f1 "$cache/stamps/$b.sum")" ] || return 1
  [ "$(sha256sum "$bin/$b" | cut -d' ' -f1)" = "$(cut -d' ' -f2 "$cache/stamps/$b.sum")" ]
}
# The binaries of a component that need building: all of them when the stamp
# names another version, else those that are missing or damaged.
stale() {
  local component=$1 version=$2 b; shift 2
  for b in "$@"; do
    if ! stamp_ok "$component" "$version"; then echo "$b"
    elif ! intact "$b"; then log "cached $bin/$b is missing or damaged: rebuilding it"; echo "$b"; fi
  done
}

build_kubernetes() {
  local kv=$KUBERNETES_VERSION todo
  todo=$(stale kubernetes "$kv" kube-apiserver kube-controller-manager kube-scheduler kubectl)
  [ -n "$todo" ] || return 0
  local sv="v0.${kv#v1.}" minor="${kv#v1.}"; minor=${minor%%.*}
  local w="$cache/src/kubernetes-$kv"
  mkdir -p "$w"
  log "building Kubernetes $kv:" $todo "(the first build on a machine takes 10-30 minutes)"
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
    local pkgs=() b
    for b in $todo; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
    go build -trimpath -ldflags "$ld" -o "$bin/" "${pkgs[@]}"
  )
  # shellcheck disable=SC2086 # $todo is a list of plain names
  record $todo
  stamp_set kubernetes "$kv"
}

build_etcd() {
  local ev=$ETCD_VERSION
  [ -n "$(stale etcd "$ev" etcd)" ] || return 0
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
  record etcd
  stamp_set etcd "$ev"
}

build_kwok() {
  local kw=$KWOK_VERSION
  [ -n "$(stale kwok "$kw" kwok)" ] || return 0
  log "building kwok $kw"
  GOBIN="$bin" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$kw"
  record kwok
  stamp_set kwok "$kw"
}

# Report, without building, which binaries are missing, damaged or of another
# version; exit 1 if any.
verify() {
  local bad
  bad=$(stale etcd "$ETCD_VERSION" etcd; stale kwok "$KWOK_VERSION" kwok
        stale kubernetes "$KUBERNETES_VERSION" kube-apiserver kube-controller-manager kube-scheduler kubectl)
  if [ -n "$bad" ]; then log "to rebuild:" $bad; return 1; fi
}

case "${1:-all}" in
  verify) verify ;;
  all) build_etcd; build_kwok; build_kubernetes ;;
  kubernetes) build_kubernetes ;;
  etcd) build_etcd ;;
  kwok) build_kwok ;;
  path) ;;
  *) echo "usage: $0 [all|kubernetes|etcd|kwok|verify|path]" >&2; exit 2 ;;
esac
printf '%s\n' "$bin"
