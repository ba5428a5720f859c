#!/usr/bin/env bash
# A single-node Kubernetes on this machine, every part built or installed by the project's own
# files (scripts/kube/build.sh: the Go module proxy; Debian's packages: runc, the CNI plugins,
# conntrack), for the chart's real install (docs/deploy.md, scripts/cluster.sh):
#   bash scripts/kube.sh up        # build once (~8 min), start (~20 s); prints the KUBECONFIG
#   bash scripts/kube.sh down      # stop every part; the cluster's data stays
#   bash scripts/kube.sh reset     # down, then forget the cluster (etcd, volumes, containers)
#   bash scripts/kube.sh status    # which parts run, the node's readiness
#   bash scripts/kube.sh load IMAGE...   # podman's images into the node's containerd (no registry)
#   bash scripts/kube.sh volumes   # the volumes of deleted claims emptied and offered again
#   bash scripts/kube.sh env       # the export line for KUBECONFIG and PATH (kubectl, helm)
#
# The parts, each its own process under $state/pids, its log in $state/logs: etcd; kube-apiserver
# (RBAC and Node authorization, the PodSecurity admission, certificates of its own); the
# controller-manager and the scheduler; containerd with runc (cgroupfs: no systemd here) and the
# CNI bridge; the kubelet; kube-proxy (iptables); CoreDNS on the node, serving the pods' bridge
# address as the cluster's DNS (cluster.local). Volumes: local PersistentVolumes in $state/volumes,
# a default StorageClass that binds them. The pods' bridge ($BRIDGE, $POD_GATEWAY) is also
# where the pods reach the node: the dev broker listens there (scripts/cluster.py).
set -euo pipefail
cd "$(dirname "$0")/.."
here=$PWD
cache=${RUNONCE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/runonce}
bin="$cache/kube/bin"
state=${RUNONCE_KUBE_DIR:-$cache/kube/cluster}
BRIDGE=runonce-kube0
POD_CIDR=10.244.0.0/24
POD_GATEWAY=10.244.0.1
SERVICE_CIDR=10.96.0.0/16
API_SERVICE_IP=10.96.0.1
NODE=runonce-node
API_PORT=${RUNONCE_KUBE_API_PORT:-6443}
ETCD_PORT=${RUNONCE_KUBE_ETCD_PORT:-2379}
PAUSE_IMAGE=localhost/podman-pause:kube
VOLUMES=${RUNONCE_KUBE_VOLUMES:-24}

say() { echo "kube: $*"; }
die() { echo "kube: $*" >&2; exit 2; }
pid_of() { local f="$state/pids/$1"; [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null && cat "$f"; }
kubectl() { "$bin/kubectl" --kubeconfig "$state/admin.kubeconfig" "$@"; }

need_root() { [ "$(id -u)" = 0 ] || die "the node's parts (containerd, the kubelet, kube-proxy) run as root; run this as root"; }

packages() {  # Debian's: runc, the CNI plugins, conntrack (kube-proxy), iptables, openssl, podman
  local need=()
  command -v runc >/dev/null 2>&1 || need+=(runc)
  [ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
  command -v conntrack >/dev/null 2>&1 || need+=(conntrack)
  command -v iptables >/dev/null 2>&1 || need+=(iptables)
  command -v openssl >/dev/null 2>&1 || need+=(openssl)
  command -v ip >/dev/null 2>&1 || need+=(iproute2)
  command -v podman >/dev/null 2>&1 || need+=(podman)
  # the pods' pause image is podman's, which it builds from catatonit (pause_image)
  command -v catatonit >/dev/null 2>&1 || [ -x /usr/libexec/podman/catatonit ] || need+=(catatonit)
  [ ${#need[@]} -eq 0 ] && return 0
  command -v apt-get >/dev/null 2>&1 || die "missing ${need[*]}: install them (Debian packages)"
  say "installing ${need[*]} (Debian packages)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
}

node_ip() { ip -4 route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p' | head -n 1; }

# --- certificates: a CA of the cluster's own; each part its identity (CN = user, O = group) ---
cert() {  # NAME CN O [SAN]: NAME.crt/NAME.key signed by the cluster's CA
  local name=$1 cn=$2 o=$3 san=${4:-} dir="$state/pki"
  [ -f "$dir/$name.crt" ] && return 0
  openssl genrsa -out "$dir/$name.key" 2048 2>/dev/null
  local subj="/CN=$cn"; [ -z "$o" ] || subj="/O=$o/CN=$cn"
  openssl req -new -key "$dir/$name.key" -subj "$subj" -out "$dir/$name.csr" 2>/dev/null
  local ext="$dir/$name.ext"
  { echo "basicConstraints=CA:FALSE"; echo "keyUsage=critical,digitalSignature,keyEncipherment"
    if [ -n "$san" ]; then echo "extendedKeyUsage=serverAuth,clientAuth"; echo "subjectAltName=$san"
    else echo "extendedKeyUsage=clientAuth"; fi; } > "$ext"
  openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
    -days 3650 -extfile "$ext" -out "$dir/$name.crt" 2>/dev/null
  rm -f "$dir/$name.csr" "$dir/$name.ext"
}

kubeconfig() {  # NAME CERT: a kubeconfig for the apiserver as CERT's identity
  local name=$1 crt=$2 file="$state/$1.kubeconfig"
  [ -f "$file" ] && return 0
  cat > "$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: runonce
  cluster:
    certificate-authority: $state/pki/ca.crt
    server: https://127.0.0.1:$API_PORT
users:
- name: $name
  user:
    client-certificate: $state/pki/$crt.crt
    client-key: $state/pki/$crt.key
contexts:
- name: runonce
  context: {cluster: runonce, user: $name}
current-context: runonce
EOF
}

pki() {
  local ip=$1 dir="$state/pki"
  mkdir -p "$dir"
  if [ ! -f "$dir/ca.crt" ]; then
    openssl genrsa -out "$dir/ca.key" 2048 2>/dev/null
    openssl req -x509 -new -key "$dir/ca.key" -subj "/CN=runonce-kube-ca" -days 3650 -out "$dir/ca.crt" 2>/dev/null
  fi
  cert apiserver kube-apiserver "" \
    "DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost,IP:127.0.0.1,IP:$API_SERVICE_IP,IP:$ip"
  cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
  cert admin admin system:masters
  cert controller-manager system:kube-controller-manager ""
  cert scheduler system:kube-scheduler ""
  cert kube-proxy system:kube-proxy ""
  cert coredns system:coredns ""
  cert kubelet "system:node:$NODE" system:nodes "DNS:$NODE,IP:127.0.0.1,IP:$ip"
  [ -f "$dir/sa.key" ] || { openssl genrsa -out "$dir/sa.key" 2048 2>/dev/null; openssl rsa -in "$dir/sa.key" -pubout -out "$dir/sa.pub" 2>/dev/null; }
  kubeconfig admin admin
  kubeconfig controller-manager controller-manager
  kubeconfig scheduler scheduler
  kubeconfig kube-proxy kube-proxy
  kubeconfig kubelet kubelet
  kubeconfig coredns coredns
}

start() {  # NAME CMD...: in the background, its pid and log under $state
  local name=$1; shift
  if pid_of "$name" >/dev/null; then return 0; fi
  echo "== $(date -u +%FT%TZ) $*" >> "$state/logs/$name.log"
  setsid "$@" >> "$state/logs/$name.log" 2>&1 < /dev/null &
  echo $! > "$state/pids/$name"
}

wait_for() {  # WHAT SECONDS CMD...: until CMD succeeds, or say which part's log to read
  local what=$1 limit=$2 start=$SECONDS; shift 2
  until "$@" >/dev/null 2>&1; do
    if [ $((SECONDS - start)) -ge "$limit" ]; then
      echo "kube: $what not ready after ${limit} s; its log's end:" >&2
      tail -n 15 "$state/logs/${what%% *}.log" >&2 || true
      exit 1
    fi
    sleep 0.5
  done
}

bridge() {  # the pods' bridge, made before the first pod so the node's services can listen on it
  ip link show "$BRIDGE" >/dev/null 2>&1 || ip link add "$BRIDGE" type bridge
  ip -4 addr show dev "$BRIDGE" | grep -q "$POD_GATEWAY/" || ip addr add "$POD_GATEWAY/${POD_CIDR#*/}" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  # a pod's packets to a Service's address cross the bridge: iptables must see them (kube-proxy)
  [ ! -e /proc/sys/net/bridge/bridge-nf-call-iptables ] || echo 1 > /proc/sys/net/bridge/bridge-nf-call-iptables
  echo 1 > /proc/sys/net/ipv4/ip_forward
}

configs() {
  local ip=$1
  mkdir -p "$state/cni" "$state/etc"
  cat > "$state/cni/10-runonce.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "runonce-kube",
  "plugins": [
    {"type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": true, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$POD_GATEWAY"}]],
              "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$state/cni-ipam"}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
  cat > "$state/etc/containerd.toml" <<EOF
version = 3
root = "$state/containerd"
state = "/run/runonce-kube/containerd"
[grpc]
  address = "/run/runonce-kube/containerd.sock"
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "$PAUSE_IMAGE"
[plugins."io.containerd.cri.v1.runtime"]
  # the kubelet asks -998 for a pod's sandbox and below 0 for Guaranteed pods; lowering it takes
  # CAP_SYS_RESOURCE, which this machine's root lacks (runc: "failed to update oom_score_adj:
  # Permission denied"): containers get containerd's own score instead, never less
  restrict_oom_score_adj = true
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "$state/cni"
  [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
      BinaryName = "$(command -v runc)"
      SystemdCgroup = false
EOF
  cat > "$state/etc/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $state/pki/ca.crt}
authorization: {mode: Webhook}
# no systemd on this machine; its cgroups are v1 (hybrid), which Kubernetes 1.34 still runs on
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix:///run/runonce-kube/containerd.sock
clusterDomain: cluster.local
clusterDNS: [$POD_GATEWAY]
tlsCertFile: $state/pki/kubelet.crt
tlsPrivateKeyFile: $state/pki/kubelet.key
staticPodPath: ""
serializeImagePulls: false
# the machine's disk is shared with the build caches: evict on real shortage only
evictionHard: {memory.available: "200Mi", nodefs.available: "2%", imagefs.available: "2%"}
imageGCHighThresholdPercent: 100
EOF
  cat > "$state/etc/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clusterCIDR: $POD_CIDR
clientConnection: {kubeconfig: $state/kube-proxy.kubeconfig}
hostnameOverride: $NODE
conntrack: {maxPerCore: 0}
EOF
  cat > "$state/etc/Corefile" <<EOF
.:53 {
    bind $POD_GATEWAY
    errors
    kubernetes cluster.local in-addr.arpa {
        kubeconfig $state/coredns.kubeconfig runonce
        pods insecure
        fallthrough in-addr.arpa
    }
    cache 5
}
EOF
}

apply_base() {  # what the cluster itself needs once: RBAC for CoreDNS, the volumes, the node's permissions
  kubectl apply -f - >/dev/null <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:coredns"}
rules:
  - apiGroups: [""]
    resources: [endpoints, services, pods, namespaces]
    verbs: [list, watch]
  - apiGroups: [discovery.k8s.io]
    resources: [endpointslices]
    verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:coredns"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: "system:coredns"}]
---
# the apiserver's own client to the kubelet (logs, exec, port-forward)
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "runonce:apiserver-kubelet"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:kubelet-api-admin"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: kube-apiserver-kubelet-client}]
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: local
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
reclaimPolicy: Retain
EOF
  local i
  for i in $(seq -w 1 "$VOLUMES"); do
    mkdir -p "$state/volumes/pv-$i"
    kubectl get pv "runonce-local-$i" >/dev/null 2>&1 && continue
    kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: PersistentVolume
metadata: {name: runonce-local-$i}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: local
  local: {path: $state/volumes/pv-$i}
  nodeAffinity:
    required:
      nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [$NODE]}]}]
EOF
  done
}

release_volumes() {  # a PersistentVolume whose claim is gone (an uninstall): emptied and offered again
  local pv
  for pv in $(kubectl get pv -o jsonpath='{range .items[?(@.status.phase=="Released")]}{.metadata.name}{"\n"}{end}'); do
    find "$state/volumes/pv-${pv#runonce-local-}" -mindepth 1 -delete 2>/dev/null || true
    kubectl patch pv "$pv" --type json -p '[{"op":"remove","path":"/spec/claimRef"}]' >/dev/null
  done
}

load() {  # IMAGE...: from podman's store into containerd's k8s.io namespace
  local image file
  for image in "$@"; do
    file=$(mktemp --suffix .tar)
    rm -f "$file"
    # a docker-archive names its image (RepoTags), as ctr names what it imports
    CONTAINERS_CONF="$here/deploy/podman/containers.conf" podman save --quiet --format docker-archive -o "$file" "$image"
    "$bin/ctr" --address /run/runonce-kube/containerd.sock -n k8s.io images import "$file" >/dev/null
    rm -f "$file"
    say "loaded $image into the node's containerd"
  done
}

up() {
  need_root
  packages
  [ "${RUNONCE_KUBE_BUILD:-1}" = 0 ] || bash "$here/scripts/kube/build.sh"
  local ip start=$SECONDS
  ip=$(node_ip)
  [ -n "$ip" ] || die "this machine has no IPv4 address with a route: the apiserver advertises one"
  mkdir -p "$state/pids" "$state/logs" "$state/volumes" /run/runonce-kube
  pki "$ip"
  configs "$ip"
  bridge
  export PATH="$bin:$PATH"
  start etcd "$bin/etcd" --name "$NODE" --data-dir "$state/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls http://127.0.0.1:0 --listen-metrics-urls "" --log-level warn
  start kube-apiserver "$bin/kube-apiserver" --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --bind-address 0.0.0.0 --secure-port "$API_PORT" --advertise-address "$ip" \
    --service-cluster-ip-range "$SERVICE_CIDR" \
    --tls-cert-file "$state/pki/apiserver.crt" --tls-private-key-file "$state/pki/apiserver.key" \
    --client-ca-file "$state/pki/ca.crt" \
    --kubelet-client-certificate "$state/pki/apiserver-kubelet-client.crt" \
    --kubelet-client-key "$state/pki/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority "$state/pki/ca.crt" \
    --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
    --kubelet-preferred-address-types InternalIP \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$state/pki/sa.pub" --service-account-signing-key-file "$state/pki/sa.key" \
    --allow-privileged=true --profiling=false --v 1
  wait_for "kube-apiserver" 90 kubectl get --raw /readyz
  start kube-controller-manager "$bin/kube-controller-manager" --kubeconfig "$state/controller-manager.kubeconfig" \
    --authentication-kubeconfig "$state/controller-manager.kubeconfig" \
    --authorization-kubeconfig "$state/controller-manager.kubeconfig" \
    --service-account-private-key-file "$state/pki/sa.key" --root-ca-file "$state/pki/ca.crt" \
    --use-service-account-credentials --leader-elect=false --bind-address 127.0.0.1 --secure-port 10257 \
    --controllers '*,-nodeipam,-cloud-node-lifecycle' --v 1
  start kube-scheduler "$bin/kube-scheduler" --kubeconfig "$state/scheduler.kubeconfig" \
    --authentication-kubeconfig "$state/scheduler.kubeconfig" --authorization-kubeconfig "$state/scheduler.kubeconfig" \
    --leader-elect=false --bind-address 127.0.0.1 --secure-port 10259 --v 1
  start containerd "$bin/containerd" --config "$state/etc/containerd.toml"
  wait_for "containerd" 30 "$bin/ctr" --address /run/runonce-kube/containerd.sock version
  if ! "$bin/ctr" --address /run/runonce-kube/containerd.sock -n k8s.io images check "name==$PAUSE_IMAGE" 2>/dev/null | grep -q "$PAUSE_IMAGE"; then
    pause_image
  fi
  apply_base
  start kubelet "$bin/kubelet" --config "$state/etc/kubelet.yaml" --kubeconfig "$state/kubelet.kubeconfig" \
    --root-dir "$state/kubelet" --hostname-override "$NODE" --node-ip "$ip" --v 1
  start kube-proxy "$bin/kube-proxy" --config "$state/etc/kube-proxy.yaml" --v 1
  [ ! -x "$bin/coredns" ] || start coredns "$bin/coredns" -conf "$state/etc/Corefile"
  wait_for "kubelet" 120 kubectl wait --for condition=Ready "node/$NODE" --timeout 2s
  release_volumes
  say "up in $((SECONDS - start)) s: node $NODE Ready; API https://127.0.0.1:$API_PORT; pods reach the node at $POD_GATEWAY"
  env_line
}

pause_image() {  # the pods' sandbox: podman's own pause image (catatonit), built here, no registry
  local tag
  CONTAINERS_CONF="$here/deploy/podman/containers.conf" podman image exists localhost/podman-pause:kube || {
    # none on a machine that never ran a pod: grep finds nothing (|| true: not an error here)
    tag=$(CONTAINERS_CONF="$here/deploy/podman/containers.conf" podman images --format '{{.Repository}}:{{.Tag}}' | { grep '^localhost/podman-pause:' || true; } | head -n 1)
    if [ -z "$tag" ]; then  # podman builds it for its first pod
      CONTAINERS_CONF="$here/deploy/podman/containers.conf" podman pod create --name runonce-kube-pause >/dev/null
      CONTAINERS_CONF="$here/deploy/podman/containers.conf" podman pod rm -f runonce-kube-pause >/dev/null
      tag=$(CONTAINERS_CONF="$here/deploy/podman/containers.conf" podman images --format '{{.Repository}}:{{.Tag}}' | { grep '^localhost/podman-pause:' || true; } | head -n 1)
      [ -n "$tag" ] || { say "podman made no pause image for its first pod"; exit 1; }
    fi
    CONTAINERS_CONF="$here/deploy/podman/containers.conf" podman tag "$tag" localhost/podman-pause:kube
  }
  load "$PAUSE_IMAGE"
}

down() {
  local name pid
  for name in coredns kube-proxy kubelet kube-scheduler kube-controller-manager kube-apiserver etcd; do
    pid=$(pid_of "$name" || true)
    [ -z "$pid" ] || { kill "$pid" 2>/dev/null || true; }
  done
  # the pods' containers: stopped by containerd before it goes (their shims would outlive it)
  if pid_of containerd >/dev/null; then
    local ctr=("$bin/ctr" --address /run/runonce-kube/containerd.sock -n k8s.io)
    for name in $("${ctr[@]}" tasks list -q 2>/dev/null); do "${ctr[@]}" tasks kill -s SIGKILL "$name" >/dev/null 2>&1 || true; done
    sleep 1
    kill "$(pid_of containerd)" 2>/dev/null || true
  fi
  pkill -f "containerd-shim-runc-v2 -namespace k8s.io" 2>/dev/null || true
  for name in coredns kube-proxy kubelet kube-scheduler kube-controller-manager kube-apiserver etcd containerd; do
    for _ in $(seq 1 40); do pid_of "$name" >/dev/null || break; sleep 0.25; done
    pid=$(pid_of "$name" || true)
    [ -z "$pid" ] || kill -9 "$pid" 2>/dev/null || true
    rm -f "$state/pids/$name"
  done
  # kube-proxy's rules and the pods' mounts go with the cluster
  if iptables-save 2>/dev/null | grep -q KUBE-; then "$bin/kube-proxy" --cleanup >/dev/null 2>&1 || true; fi
  local table chain
  for table in filter nat mangle; do  # the kubelet's own chains (its firewall, its canaries)
    iptables -t "$table" -D INPUT -j KUBE-FIREWALL 2>/dev/null || true
    iptables -t "$table" -D OUTPUT -j KUBE-FIREWALL 2>/dev/null || true
    for chain in $(iptables -t "$table" -S 2>/dev/null | sed -n 's/^-N \(KUBE-[A-Z-]*\)$/\1/p'); do
      iptables -t "$table" -F "$chain" 2>/dev/null || true
      iptables -t "$table" -X "$chain" 2>/dev/null || true
    done
  done
  local m
  for m in $( { grep -o " $state/kubelet/[^ ]*" /proc/mounts; grep -o " /run/runonce-kube/[^ ]*" /proc/mounts; } | sort -r || true); do
    umount -l "$m" 2>/dev/null || true
  done
  say "down"
}

status() {
  local name pid
  for name in etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet kube-proxy coredns; do
    pid=$(pid_of "$name" || true)
    if [ -n "$pid" ]; then printf '%-24s running (pid %s)\n' "$name" "$pid"; else printf '%-24s stopped\n' "$name"; fi
  done
  [ -z "$(pid_of kube-apiserver || true)" ] || kubectl get nodes -o wide 2>&1 || true
}

env_line() {
  echo "export KUBECONFIG=$state/admin.kubeconfig PATH=$bin:$cache/bin:\$PATH"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  reset) down; rm -rf "${state:?}"; ip link del "$BRIDGE" 2>/dev/null || true; say "reset: $state removed" ;;
  status) status ;;
  load) shift; load "$@" ;;
  volumes) release_volumes; say "volumes: $(kubectl get pv --no-headers | awk '$5 == "Available"' | wc -l) available" ;;
  env) env_line ;;
  -h|--help|"") sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; [ -n "${1:-}" ] ;;
  *) die "unknown command $1 (up, down, reset, status, load IMAGE..., volumes, env)" ;;
esac
