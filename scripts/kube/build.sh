#!/usr/bin/env bash
# Build the parts of a single-node Kubernetes from the Go module proxy into ~/.cache/runonce/kube/bin,
# once per version (scripts/kube.sh up calls it; safe to run again):
#   - kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy, kubectl:
#     k8s.io/kubernetes, built in a module of our own that requires it and points each of its
#     staging modules (its go.mod's `=> ./staging/...` lines) at the same module released at v0.x
#   - etcd: a main of three lines calling go.etcd.io/etcd/server/v3/etcdmain.Main
#   - containerd, its runc shim and ctr: github.com/containerd/containerd/v2
#   - CoreDNS: github.com/coredns/coredns
# runc and the CNI plugins come from Debian's packages (scripts/kube.sh installs them).
set -euo pipefail
K8S_VERSION=v1.34.2          # k8s.io/kubernetes; its staging modules are v0.34.2
ETCD_VERSION=v3.6.13
CONTAINERD_VERSION=v2.4.2
COREDNS_VERSION=v1.14.7
cache=${RUNONCE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/runonce}
root="$cache/kube" bin="$cache/kube/bin"
mkdir -p "$bin" "$root/src"
# one build at a time on this machine (two clones share the cache)
exec 9>"$root/.build.lock"
flock 9
go_bin=$(command -v go || echo /usr/local/go/bin/go)
[ -x "$go_bin" ] || { echo "kube build: Go is missing (bash scripts/setup.sh --test installs it)" >&2; exit 2; }
export GOFLAGS=-trimpath CGO_ENABLED=0

built() { [ -x "$bin/$1" ] && [ "$(cat "$bin/.$1.version" 2>/dev/null)" = "$2" ]; }
mark() { echo "$2" > "$bin/.$1.version"; }
timed() {  # WHAT CMD...: run, then say how long it took
  local what=$1 start=$SECONDS; shift
  echo "kube build: $what ..."
  "$@"
  echo "kube build: $what in $((SECONDS - start)) s"
}

# --- Kubernetes ---
k8s_parts=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
need_k8s=()
for part in "${k8s_parts[@]}"; do built "$part" "k8s.io/kubernetes@$K8S_VERSION" || need_k8s+=("$part"); done
if [ ${#need_k8s[@]} -gt 0 ]; then
  src="$root/src/kubernetes-$K8S_VERSION"
  if [ ! -f "$src/go.sum" ]; then
    rm -rf "$src" && mkdir -p "$src"
    staging="0${K8S_VERSION#v1}"   # v1.34.2 -> 0.34.2
    (
      cd "$src"
      "$go_bin" mod init runonce.local/kube >/dev/null 2>&1
      "$go_bin" mod download -json "k8s.io/kubernetes@$K8S_VERSION" >/dev/null
      gomod=$("$go_bin" env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/$K8S_VERSION.mod
      {
        echo "require k8s.io/kubernetes $K8S_VERSION"
        sed -n 's|^\s*\(k8s.io/[a-z0-9.-]*\) => ./staging/.*|replace \1 => \1 v'"$staging"'|p' "$gomod"
      } >> go.mod
      cat > tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
      timed "go mod tidy (k8s.io/kubernetes $K8S_VERSION)" "$go_bin" mod tidy
    )
  fi
  minor=${K8S_VERSION#v1.}   # v1.34.2 -> 34
  minor=${minor%%.*}
  ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
  for part in "${need_k8s[@]}"; do
    (cd "$src" && timed "$part" "$go_bin" build -ldflags "$ldflags" -o "$bin/$part" "k8s.io/kubernetes/cmd/$part")
    mark "$part" "k8s.io/kubernetes@$K8S_VERSION"
  done
fi

# --- etcd ---
if ! built etcd "go.etcd.io/etcd/server/v3@$ETCD_VERSION"; then
  src="$root/src/etcd-$ETCD_VERSION"
  rm -rf "$src" && mkdir -p "$src"
  (
    cd "$src"
    "$go_bin" mod init runonce.local/etcd >/dev/null 2>&1
    cat > main.go <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
    "$go_bin" get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >/dev/null 2>&1
    "$go_bin" mod tidy
    timed "etcd $ETCD_VERSION" "$go_bin" build -ldflags "-s -w" -o "$bin/etcd" .
  )
  mark etcd "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
fi

# --- containerd ---
if ! built containerd "github.com/containerd/containerd/v2@$CONTAINERD_VERSION"; then
  src="$root/src/containerd-$CONTAINERD_VERSION"
  rm -rf "$src" && mkdir -p "$src"
  (
    cd "$src"
    "$go_bin" mod init runonce.local/containerd >/dev/null 2>&1
    "$go_bin" get "github.com/containerd/containerd/v2@$CONTAINERD_VERSION" >/dev/null 2>&1
    cat > tools.go <<'GO'
//go:build tools

package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
GO
    "$go_bin" mod tidy
    # no btrfs, devmapper or zfs snapshotters: overlayfs and native serve a single node
    for part in containerd containerd-shim-runc-v2 ctr; do
      timed "$part $CONTAINERD_VERSION" "$go_bin" build -tags "no_btrfs no_devmapper no_zfs no_aufs" \
        -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION" \
        -o "$bin/$part" "github.com/containerd/containerd/v2/cmd/$part"
    done
  )
  mark containerd "github.com/containerd/containerd/v2@$CONTAINERD_VERSION"
fi
# --- CoreDNS: the cluster's DNS (scripts/kube.sh runs it on the node, serving the pods' bridge) ---
if ! built coredns "github.com/coredns/coredns@$COREDNS_VERSION"; then
  timed "coredns $COREDNS_VERSION" env GOBIN="$bin" "$go_bin" install -ldflags "-s -w" "github.com/coredns/coredns@$COREDNS_VERSION"
  mark coredns "github.com/coredns/coredns@$COREDNS_VERSION"
fi
echo "kube build: all parts in $bin"
