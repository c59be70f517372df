#!/usr/bin/env bash
# Build the testbed's control-plane binaries from the Go module proxy.
#
# Called by `make testbed-build` (and so by `make test` / `make run`). Builds
# kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, etcd and
# kwok (`all`), and for the real node kubelet, kube-proxy and CoreDNS after
# installing the pinned Debian packages (`node`) and its images (`images`,
# testbed/images.py), at the versions pinned in testbed/versions.env, into a cache outside the
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

# Build Kubernetes programs from k8s.io/kubernetes at KUBERNETES_VERSION in the
# wrapper module $cache/src/<dir> (one per caller, so two builds running at
# once never edit the same go.mod; the Go build cache is shared, so packages
# both use compile once): build_k8s STAMP DIR PROGRAM...
build_k8s() {
  local stamp=$1 dir=$2 kv=$KUBERNETES_VERSION todo; shift 2
  todo=$(stale "$stamp" "$kv" "$@")
  [ -n "$todo" ] || return 0
  local sv="v0.${kv#v1.}" minor="${kv#v1.}"; minor=${minor%%.*}
  local w="$cache/src/$dir"
  mkdir -p "$w"
  log "building Kubernetes $kv:" $todo "(the first build on a machine takes 10-30 minutes)"
  (
    cd "$w"
    [ -f go.mod ] || go mod init "testbed.local/$stamp" >/dev/null 2>&1
    local meta upmod commit m b tools=()
    meta=$(go list -m -json "k8s.io/kubernetes@$kv")
    upmod=$(printf '%s' "$meta" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
    commit=$(printf '%s' "$meta" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("Origin", {}).get("Hash", "unknown"))')
    # k8s.io/kubernetes requires its staging modules at v0.0.0 and maps them to
    # ./staging; as a dependency those replaces are ignored, so map each one to
    # its published tag. The list comes from the tag's own go.mod.
    for m in $(sed -n 's#^[[:space:]]*\(k8s\.io/[A-Za-z0-9._-]*\) => \./staging/.*#\1#p' "$upmod"); do
      go mod edit -replace="$m=$m@$sv"
    done
    for b in "$@"; do tools+=("k8s.io/kubernetes/cmd/$b@$kv"); done
    go get -tool "${tools[@]}"
    # Stamp the version the way upstream's release build does, so /version,
    # kubectl and client version gates see the real release.
    local ld="-s -w" p now
    now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
    for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ld="$ld -X $p.gitVersion=$kv -X $p.gitMajor=1 -X $p.gitMinor=$minor"
      ld="$ld -X $p.gitCommit=$commit -X $p.gitTreeState=clean -X $p.buildDate=$now"
    done
    local pkgs=()
    for b in $todo; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
    go build -trimpath -ldflags "$ld" -o "$bin/" "${pkgs[@]}"
  )
  # shellcheck disable=SC2086 # $todo is a list of plain names
  record $todo
  stamp_set "$stamp" "$kv"
}

build_kubernetes() {
  build_k8s kubernetes "kubernetes-$KUBERNETES_VERSION" \
    kube-apiserver kube-controller-manager kube-scheduler kubectl
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

# The real node's kubelet and kube-proxy: the same release as the control
# plane, built the same way.
build_node_kubernetes() {
  build_k8s node-kubernetes "kubernetes-node-$KUBERNETES_VERSION" kubelet kube-proxy
}

# Cluster DNS of the real node: CoreDNS as a host process in the node's
# network namespace. Its module has no replace directives: `go install` works.
build_coredns() {
  local cv=$COREDNS_VERSION
  [ -n "$(stale coredns "$cv" coredns)" ] || return 0
  log "building CoreDNS $cv"
  GOBIN="$bin" go install -trimpath -ldflags "-s -w" "github.com/coredns/coredns@$cv"
  record coredns
  stamp_set coredns "$cv"
}

# The Debian packages the real node runs (containerd, runc, the CNI plugins,
# iptables for kube-proxy) and the image builder, at the pinned versions.
# Only as root; without root the testbed says so and runs the fake nodes only.
host_packages() {
  local want=("containerd=$DEB_CONTAINERD" "runc=$DEB_RUNC"
    "containernetworking-plugins=$DEB_CNI_PLUGINS" "iptables=$DEB_IPTABLES"
    "mmdebstrap=$DEB_MMDEBSTRAP") missing=() p have
  for p in "${want[@]}"; do
    have=$(dpkg-query -W -f '${Version}' "${p%%=*}" 2>/dev/null || true)
    [ "$have" = "${p#*=}" ] || missing+=("$p")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    log "not installing ${missing[*]}: needs root and apt-get (the testbed then runs fake nodes only)"
    return 0
  fi
  log "installing ${missing[*]}"
  # The packaged containerd ships a service unit only: nothing starts it here.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >&2 ||
    { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >&2; }
}

# Report, without building, which binaries are missing, damaged or of another
# version; exit 1 if any.
verify() {
  local bad
  bad=$(stale etcd "$ETCD_VERSION" etcd; stale kwok "$KWOK_VERSION" kwok
        stale kubernetes "$KUBERNETES_VERSION" kube-apiserver kube-controller-manager kube-scheduler kubectl)
  if [ -n "$bad" ]; then log "to rebuild:" $bad; return 1; fi
}

# Images need root and mmdebstrap; without them the testbed runs fake nodes
# only and says why, so a build without root is not an error.
build_images() {
  if [ "$(id -u)" != 0 ] || ! command -v mmdebstrap >/dev/null; then
    log "not building the real node's images: needs root and mmdebstrap"
    return 0
  fi
  (cd "$here/.." && "${PYTHON:-python3}" -m testbed images >&2)
}

# moto's S3 server for the Backup kind's object-store proof (tests/realnode),
# in a virtualenv of its own: the project's venvs stay as pinned.
build_s3() {
  local v=$MOTO_VERSION venv="$cache/moto-$MOTO_VERSION"
  [ -x "$venv/bin/moto_server" ] && stamp_ok moto "$v" && return 0
  log "installing moto[server] $v"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "moto[server]==$v" >&2
  stamp_set moto "$v"
}

[ $# -gt 0 ] || set -- all
for step in "$@"; do
  case "$step" in
    verify) verify ;;
    all) build_etcd; build_kwok; build_kubernetes ;;
    kubernetes) build_kubernetes ;;
    etcd) build_etcd ;;
    kwok) build_kwok ;;
    node) host_packages; build_node_kubernetes; build_coredns ;;
    images) build_images ;;
    s3) build_s3 ;;
    path) ;;
    *) echo "usage: $0 [all|kubernetes|etcd|kwok|node|images|s3|verify|path]..." >&2; exit 2 ;;
  esac
done
printf '%s\n' "$bin"
