#!/usr/bin/env bash
# A one-node Kubernetes made of real upstream parts that a machine without
# image registries can get: kube-apiserver, kube-controller-manager,
# kube-scheduler, kubelet, kube-proxy and kubectl built from
# k8s.io/kubernetes, Helm from helm.sh/helm/v3 and CoreDNS from
# github.com/coredns/coredns, all on the Go module proxy; containerd, runc,
# the CNI plugins and etcd from Debian (scripts/deps.sh k8s). make e2e-helm
# runs the chart on it (e2e/helm_test.go).
#
#   k8s-local.sh build   build what is not cached yet; prints the bin dir
#   k8s-local.sh up      start the cluster as local processes under $K8S_DIR
#                        (default /tmp/sovereign-k8s) and wait for the node
#                        to be Ready; prints the kubeconfig's path
#   k8s-local.sh load IMAGE...
#                        copy images from the Docker engine into the
#                        cluster's containerd (docker save | ctr import)
#   k8s-local.sh down    stop everything up started and remove its state
#
# The cluster: etcd, the control plane, CoreDNS (a process on the node,
# answering on the node's address, which the kubelet gives pods as their
# DNS server), containerd with its own socket and root (a Docker engine's
# containerd is left alone), the kubelet, and kube-proxy in iptables mode
# routing Service addresses on the node, so tests reach Services from it.
# Pods share one CNI bridge. Pod sandboxes run a locally built pause image
# (e2e/cmd/pause); PersistentVolumes are directories on the node.
#
# Binaries are cached in ~/.cache/sovereign-e2e/{k8s,helm,coredns}-<version>
# (CoreDNS's also keyed by its plugins): a warm run builds nothing.
# Progress goes to stderr; stdout carries only the path a command prints.
# Needs root (containerd, kubelet, iptables) and go on PATH. Builds run
# under nice with GOFLAGS=-p=1 unless K8S_BUILD_FLAGS says otherwise: the
# machines they run on are shared.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/gomodule.sh

K8S_VERSION=v1.34.4   # k8s.io/kubernetes; its staging modules are at v0.34.4
HELM_VERSION=v3.21.4  # helm.sh/helm/v3
COREDNS_VERSION=v1.12.3 # github.com/coredns/coredns (Kubernetes 1.34 ships 1.12)

CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/sovereign-e2e"
K8S_BIN="$CACHE/k8s-$K8S_VERSION"
HELM_BIN="$CACHE/helm-$HELM_VERSION"
COREDNS_PLUGINS=(bind errors kubernetes forward cache) # what the Corefile names
COREDNS_BIN="$CACHE/coredns-$COREDNS_VERSION-$(IFS=-; echo "${COREDNS_PLUGINS[*]}")"
K8S_BUILD_FLAGS=${K8S_BUILD_FLAGS:--p=1}
log() { echo "k8s-local: $*" >&2; }

# The commands built from k8s.io/kubernetes. kube-proxy routes Service
# ClusterIPs (iptables mode): the chart's components find each other by
# Service name, and the e2e reaches the gateway through its Service.
K8S_CMDS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)

# build_cached DEST MODULE VERSION PREPARE LDFLAGS PACKAGE...: unless the
# directory DEST exists, build the PACKAGEs of MODULE@VERSION into it, after
# running the function PREPARE in the module's copy.
build_cached() {
  local dest=$1 mod=$2 ver=$3 prepare=$4 ldflags=$5 work start=$SECONDS
  shift 5
  [ -d "$dest" ] && return
  work=$(module_copy "$mod" "$ver")
  (cd "$work/src" && "$prepare")
  log "building $mod@$ver ($*; first time only, long on two cores)…"
  GO_BUILD_FLAGS=$K8S_BUILD_FLAGS go_build_in "$work/src" "$work/out/" "$ldflags" "$@"
  mkdir -p "$CACHE"
  rm -rf "$dest.tmp" && mv "$work/out" "$dest.tmp" && mv "$dest.tmp" "$dest"
  rm -rf "$work"
  log "built $mod@$ver in $((SECONDS - start)) s"
}

# The module's go.mod points its staging modules (k8s.io/api, client-go…)
# at ./staging, which the published module does not hold: point them at
# their published versions, v0.<minor>.<patch> for v1.<minor>.<patch>.
kubernetes_staging() {
  sed -n 's|^\t\(k8s.io/[a-z0-9-]*\) => ./staging/.*|\1|p' go.mod \
    | while read -r m; do go mod edit -replace "$m=$m@v0.${K8S_VERSION#v1.}"; done
}

# What hack/lib/version.sh stamps: the version the API server and kubelet
# report (Helm checks charts' kubeVersion against it).
kubernetes_ldflags() {
  local minor=${K8S_VERSION#v1.} key pkg
  minor=${minor%%.*}
  for key in gitVersion=$K8S_VERSION gitMajor=1 gitMinor=$minor gitTreeState=clean \
             buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ); do
    for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do printf -- '-X %s.%s ' $pkg "$key"; done
  done
}

# What Helm's Makefile stamps: its version, and the Kubernetes version that
# helm template and helm lint assume without a cluster (this cluster's, not
# the default 1.20, which the chart's kubeVersion refuses).
helm_ldflags() {
  local minor=${K8S_VERSION#v1.} pkg
  minor=${minor%%.*}
  printf -- '-X helm.sh/helm/v3/internal/version.version=%s ' "$HELM_VERSION"
  for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
    printf -- '-X %s.k8sVersionMajor=1 -X %s.k8sVersionMinor=%s ' $pkg $pkg "$minor"
  done
}

# CoreDNS with the plugins the cluster's Corefile names, instead of every
# plugin (cloud DNS providers and their SDKs): the import list its
# generator wrote is cut down to them.
coredns_plugins() {
  local p
  { echo 'package plugin'; echo 'import ('
    for p in "${COREDNS_PLUGINS[@]}"; do echo "_ \"github.com/coredns/coredns/plugin/$p\""; done
    echo ')'; } > core/plugin/zplugin.go
}

# build fills the cache and prints a directory with every binary in it.
build() {
  local cmds=() c
  for c in "${K8S_CMDS[@]}"; do cmds+=("./cmd/$c"); done
  build_cached "$K8S_BIN" k8s.io/kubernetes "$K8S_VERSION" kubernetes_staging "$(kubernetes_ldflags)" "${cmds[@]}"
  build_cached "$HELM_BIN" helm.sh/helm/v3 "$HELM_VERSION" : "$(helm_ldflags)" ./cmd/helm
  build_cached "$COREDNS_BIN" github.com/coredns/coredns "$COREDNS_VERSION" coredns_plugins "" .
  mkdir -p "$CACHE/k8s-bin"
  local b
  for b in "$K8S_BIN"/* "$HELM_BIN/helm" "$COREDNS_BIN/coredns"; do ln -sf "$b" "$CACHE/k8s-bin/"; done
  echo "$CACHE/k8s-bin"
}

# ---- the cluster ----------------------------------------------------------

K8S_DIR=${K8S_DIR:-/tmp/sovereign-k8s}
NODE=sovereign-node
POD_CIDR=10.244.0.0/24
SERVICE_CIDR=10.96.0.0/16
SERVICE_API_IP=10.96.0.1   # the first address: the kubernetes Service
PAUSE_IMAGE=localhost/sovereign-k8s/pause:local
SOCK="$K8S_DIR/containerd.sock"

# node_ip: the address of the interface of the default route, which pods
# reach through the bridge's gateway (the API server and DNS listen there).
node_ip() { ip -4 route get 1.1.1.1 | sed -n 's/.* src \([0-9.]*\).*/\1/p'; }

# cert NAME CN [O] [SANS]: a key and a certificate signed by the cluster CA.
cert() {
  local name=$1 cn=$2 o=${3:-} sans=${4:-} subj ext
  subj="/CN=$cn"
  [ -n "$o" ] && subj="/O=$o$subj"
  ext=$(mktemp)
  printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\n' > "$ext"
  [ -n "$sans" ] && echo "subjectAltName=$sans" >> "$ext"
  openssl req -new -newkey rsa:2048 -nodes -keyout "$K8S_DIR/pki/$name.key" -subj "$subj" 2>/dev/null \
    | openssl x509 -req -CA "$K8S_DIR/pki/ca.crt" -CAkey "$K8S_DIR/pki/ca.key" -CAcreateserial \
        -days 7 -extfile "$ext" -out "$K8S_DIR/pki/$name.crt" 2>/dev/null
  rm -f "$ext"
}

# kubeconfig NAME: a kubeconfig for the client certificate NAME.
kubeconfig() {
  local pki="$K8S_DIR/pki"
  cat > "$K8S_DIR/$1.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: "https://$IP:6443", certificate-authority: "$pki/ca.crt"}
users:
- name: $1
  user: {client-certificate: "$pki/$1.crt", client-key: "$pki/$1.key"}
contexts:
- name: local
  context: {cluster: local, user: $1}
current-context: local
EOF
}

pki() {
  local pki="$K8S_DIR/pki"
  mkdir -p "$pki"
  openssl req -x509 -new -newkey rsa:2048 -nodes -keyout "$pki/ca.key" -out "$pki/ca.crt" \
    -days 7 -subj /CN=sovereign-k8s-ca 2>/dev/null
  openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
  openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
  cert apiserver kube-apiserver "" "IP:$IP,IP:127.0.0.1,IP:$SERVICE_API_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
  cert kubelet "system:node:$NODE" system:nodes "IP:$IP,DNS:$NODE"
  cert admin admin system:masters
  cert controller-manager system:kube-controller-manager
  cert scheduler system:kube-scheduler
  cert kube-proxy system:kube-proxy
  cert coredns coredns
  local c
  for c in admin kubelet controller-manager scheduler kube-proxy coredns; do kubeconfig $c; done
}

# start NAME COMMAND...: run COMMAND in the background, its output in
# logs/NAME.log and its pid in run/NAME.pid (down stops it).
start() {
  local name=$1
  shift
  nohup "$@" >"$K8S_DIR/logs/$name.log" 2>&1 </dev/null &
  echo $! > "$K8S_DIR/run/$name.pid"
}

# wait_for WHAT SECONDS COMMAND...: poll COMMAND until it succeeds.
wait_for() {
  local what=$1 secs=$2 i
  shift 2
  for ((i = 0; i < secs; i++)); do
    "$@" >/dev/null 2>&1 && return
    sleep 1
  done
  log "$what: not ready after ${secs}s; logs in $K8S_DIR/logs"
  return 1
}

# oci_image NAME ROOTFS ENTRYPOINT: pack the directory ROOTFS as a one-layer
# OCI image named NAME and import it into containerd.
oci_image() {
  local name=$1 rootfs=$2 entry=$3 dir ldigest lsize cdigest csize mdigest msize
  dir=$(mktemp -d)
  mkdir -p "$dir/blobs/sha256"
  tar -C "$rootfs" --owner=0 --group=0 --numeric-owner -cf "$dir/layer.tar" .
  ldigest=$(sha256sum < "$dir/layer.tar" | cut -d' ' -f1); lsize=$(stat -c %s "$dir/layer.tar")
  mv "$dir/layer.tar" "$dir/blobs/sha256/$ldigest"
  printf '{"architecture":"%s","os":"linux","config":{"Entrypoint":["%s"],"User":"65535:65535"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
    "$(go env GOARCH)" "$entry" "$ldigest" > "$dir/config.json"
  cdigest=$(sha256sum < "$dir/config.json" | cut -d' ' -f1); csize=$(stat -c %s "$dir/config.json")
  mv "$dir/config.json" "$dir/blobs/sha256/$cdigest"
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
    "$cdigest" "$csize" "$ldigest" "$lsize" > "$dir/manifest.json"
  mdigest=$(sha256sum < "$dir/manifest.json" | cut -d' ' -f1); msize=$(stat -c %s "$dir/manifest.json")
  mv "$dir/manifest.json" "$dir/blobs/sha256/$mdigest"
  printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"io.containerd.image.name":"%s"}}]}' \
    "$mdigest" "$msize" "$name" > "$dir/index.json"
  echo '{"imageLayoutVersion":"1.0.0"}' > "$dir/oci-layout"
  tar -C "$dir" -cf - oci-layout index.json blobs | ctr_ images import - >/dev/null
  rm -rf "$dir"
}

ctr_() { ctr --address "$SOCK" -n k8s.io "$@"; }
kubectl_() { "$BIN/kubectl" --kubeconfig "$K8S_DIR/admin.kubeconfig" "$@"; }

node_ready() { kubectl_ get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' | grep -qx True; }

# volumes: PersistentVolumes on the node's disk, in place of a storage
# provisioner: claims without a StorageClass bind to them. Open to every
# user, since the kubelet applies no fsGroup to a hostPath.
PV_COUNT=8 PV_SIZE=10Gi
volumes() {
  local i
  for ((i = 1; i <= PV_COUNT; i++)); do
    mkdir -p "$K8S_DIR/volumes/pv$i" && chmod 0777 "$K8S_DIR/volumes/pv$i"
    cat <<EOF
apiVersion: v1
kind: PersistentVolume
metadata: {name: local-pv$i}
spec:
  capacity: {storage: $PV_SIZE}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ""
  hostPath: {path: "$K8S_DIR/volumes/pv$i", type: Directory}
---
EOF
  done | kubectl_ apply -f - >/dev/null
}

up() {
  [ "$(id -u)" = 0 ] || { log "up needs root (containerd, kubelet, iptables)"; exit 1; }
  if [ -e "$K8S_DIR/run" ]; then log "$K8S_DIR is in use: run down first"; exit 1; fi
  ./scripts/deps.sh k8s
  BIN=$(build)
  IP=$(node_ip)
  local start=$SECONDS
  mkdir -p "$K8S_DIR"/{logs,run,cni,etcd,kubelet,pod-logs,containerd/root,containerd/state,containerd/opt}
  pki

  # containerd: its own socket, root and state, so that a Docker engine's
  # containerd on the same machine is left alone; the CRI plugin with the
  # local pause image and the CNI bridge below.
  cat > "$K8S_DIR/containerd.toml" <<EOF
version = 2
root = "$K8S_DIR/containerd/root"
state = "$K8S_DIR/containerd/state"
[grpc]
  address = "$SOCK"
[plugins."io.containerd.internal.v1.opt"]
  path = "$K8S_DIR/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # The kubelet asks for negative OOM scores (-998 for sandboxes), which
  # need CAP_SYS_RESOURCE: the VMs and containers that run CI may lack it,
  # and runc then starts no pod ("can't get final child's PID"). Scores
  # are kept at or above containerd's own instead.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$K8S_DIR/cni"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
EOF
  # One bridge for the node's pods, masquerading what leaves the node;
  # hairpin mode lets a pod reach itself through its Service.
  cat > "$K8S_DIR/cni/10-sovereign.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "sovereign", "plugins": [
  {"type": "bridge", "bridge": "sov-cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_CIDR"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}
]}
EOF
  # Docker sets the FORWARD policy to DROP, and the bridge's traffic goes
  # through iptables (br_netfilter, which kube-proxy needs): let the pods'
  # own traffic pass.
  pod_forward -I
  start containerd containerd --config "$K8S_DIR/containerd.toml"
  wait_for containerd 30 ctr_ version
  local pause
  pause=$(mktemp -d)
  (GOFLAGS="$K8S_BUILD_FLAGS" CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$pause/pause" ./e2e/cmd/pause)
  oci_image "$PAUSE_IMAGE" "$pause" /pause
  rm -rf "$pause"

  start etcd etcd --name sovereign --data-dir "$K8S_DIR/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster sovereign=http://127.0.0.1:2380
  local pki="$K8S_DIR/pki"
  start kube-apiserver "$BIN/kube-apiserver" --etcd-servers http://127.0.0.1:2379 \
    --advertise-address "$IP" --secure-port 6443 --service-cluster-ip-range "$SERVICE_CIDR" \
    --client-ca-file "$pki/ca.crt" --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
    --kubelet-client-certificate "$pki/apiserver-kubelet-client.crt" --kubelet-client-key "$pki/apiserver-kubelet-client.key" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
    --kubelet-preferred-address-types InternalIP \
    --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction --allow-privileged
  wait_for kube-apiserver 120 kubectl_ get --raw /readyz
  start kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig "$K8S_DIR/controller-manager.kubeconfig" \
    --authentication-kubeconfig "$K8S_DIR/controller-manager.kubeconfig" --authorization-kubeconfig "$K8S_DIR/controller-manager.kubeconfig" \
    --root-ca-file "$pki/ca.crt" --service-account-private-key-file "$pki/sa.key" --use-service-account-credentials \
    --cluster-signing-cert-file "$pki/ca.crt" --cluster-signing-key-file "$pki/ca.key" \
    --leader-elect=false --bind-address 127.0.0.1
  start kube-scheduler "$BIN/kube-scheduler" --kubeconfig "$K8S_DIR/scheduler.kubeconfig" \
    --authentication-kubeconfig "$K8S_DIR/scheduler.kubeconfig" --authorization-kubeconfig "$K8S_DIR/scheduler.kubeconfig" \
    --leader-elect=false --bind-address 127.0.0.1
  # CoreDNS, as a process on the node: the kube-dns Service's address is
  # the node's, where pods reach it through the bridge.
  kubectl_ apply -f - >/dev/null <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:coredns"}
rules:
- {apiGroups: [""], resources: [endpoints, services, pods, namespaces], verbs: [list, watch]}
- {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: coredns}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:coredns"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: coredns}]
EOF
  cat > "$K8S_DIR/Corefile" <<EOF
.:53 {
  bind $IP
  errors
  kubernetes cluster.local in-addr.arpa ip6.arpa {
    kubeconfig $K8S_DIR/coredns.kubeconfig local
    pods insecure
    fallthrough in-addr.arpa ip6.arpa
  }
  forward . /etc/resolv.conf
  cache 30
}
EOF
  start coredns "$BIN/coredns" -conf "$K8S_DIR/Corefile"

  cat > "$K8S_DIR/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: "$pki/ca.crt"}
authorization: {mode: AlwaysAllow}
tlsCertFile: "$pki/kubelet.crt"
tlsPrivateKeyFile: "$pki/kubelet.key"
containerRuntimeEndpoint: "unix://$SOCK"
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
clusterDNS: ["$IP"]
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
readOnlyPort: 0
podLogsDir: "$K8S_DIR/pod-logs"
imageGCHighThresholdPercent: 100
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
EOF
  start kubelet "$BIN/kubelet" --config "$K8S_DIR/kubelet.yaml" --kubeconfig "$K8S_DIR/kubelet.kubeconfig" \
    --root-dir "$K8S_DIR/kubelet" --hostname-override "$NODE" --node-ip "$IP"
  start kube-proxy "$BIN/kube-proxy" --kubeconfig "$K8S_DIR/kube-proxy.kubeconfig" --hostname-override "$NODE" \
    --proxy-mode iptables --cluster-cidr "$POD_CIDR" --conntrack-max-per-core 0 \
    --healthz-bind-address 127.0.0.1:10256 --metrics-bind-address 127.0.0.1:10249
  wait_for "node $NODE Ready" 180 node_ready
  volumes
  log "node $NODE Ready in $((SECONDS - start)) s (kubeconfig $K8S_DIR/admin.kubeconfig)"
  echo "$K8S_DIR/admin.kubeconfig"
}

# load IMAGE...: copy images from the Docker engine into the cluster's
# containerd, where pods find them without a registry.
load() {
  local start=$SECONDS
  docker save "$@" | ctr_ images import - >/dev/null
  log "loaded $# images in $((SECONDS - start)) s"
}

# kube_chains_cleanup removes the iptables chains the kubelet adds
# (KUBE-FIREWALL, the canaries), which kube-proxy --cleanup leaves.
kube_chains_cleanup() {
  local ipt t chain rule
  for ipt in iptables ip6tables; do
    for t in filter nat mangle; do
      for chain in $($ipt -t $t -S 2>/dev/null | sed -n 's/^-N \(KUBE-[^ ]*\)$/\1/p'); do
        $ipt -t $t -S 2>/dev/null | grep -- "-j $chain\( \|$\)" | grep -v "^-A KUBE-" | sed 's/^-A //' \
          | while read -r rule; do eval "$ipt -t $t -D $rule" 2>/dev/null || true; done || true
        $ipt -t $t -F "$chain" 2>/dev/null || true
        $ipt -t $t -X "$chain" 2>/dev/null || true
      done
    done
  done
}

# pod_forward -I|-D: insert or delete the FORWARD rules that accept the
# pods' traffic.
pod_forward() {
  local dir
  for dir in -s -d; do
    iptables "$1" FORWARD "$dir" "$POD_CIDR" -m comment --comment sovereign-k8s -j ACCEPT 2>/dev/null || true
  done
}

# cni_cleanup NETNS...: undo what the CNI plugins did for sandboxes that
# were killed rather than torn down: the masquerade rules and chains of the
# "sovereign" network, host-local's address leases, the pods' network
# namespaces (NETNS) and the bridge.
cni_cleanup() {
  local rule ns
  iptables -t nat -S POSTROUTING | grep -- '--comment "name: \\"sovereign\\" ' | sed 's/^-A //' \
    | while read -r rule; do
        eval "iptables -t nat -D $rule"
        iptables -t nat -F "${rule##* -j }" && iptables -t nat -X "${rule##* -j }"
      done || true
  for ns in "$@"; do umount "$ns" 2>/dev/null || true; rm -f "$ns"; done
  ip link del sov-cni0 2>/dev/null || true
  rm -rf /var/lib/cni/networks/sovereign /var/lib/cni/results/sovereign-*
}

# down stops the processes, kills every container (faster and surer than
# waiting for the kubelet to stop each pod), and removes what they left on
# the host.
down() {
  [ -d "$K8S_DIR/run" ] || return 0
  BIN="$CACHE/k8s-bin"
  local name task ids netns pid
  for name in kube-proxy kubelet coredns kube-scheduler kube-controller-manager kube-apiserver etcd; do
    stop "$name"
  done
  ids=$(ctr_ containers ls -q 2>/dev/null) || true
  netns=$(for task in $ids; do ctr_ containers info "$task"; done | grep -o '/var/run/netns/cni-[0-9a-f-]*' | sort -u) || true
  for task in $ids; do rm -f /var/lib/cni/results/*-"$task"-*; done
  for task in $(ctr_ tasks ls -q 2>/dev/null); do
    ctr_ tasks kill -s SIGKILL "$task" >/dev/null 2>&1 || true
    ctr_ tasks delete "$task" >/dev/null 2>&1 || true
  done
  stop containerd
  # Shims whose tasks had already gone outlive containerd: ours name its
  # socket.
  for pid in $(pgrep -f -- "-address $SOCK( |$)"); do kill -9 "$pid" 2>/dev/null || true; done
  "$BIN/kube-proxy" --cleanup >/dev/null 2>&1 || true
  kube_chains_cleanup
  # shellcheck disable=SC2086 # one path per word
  cni_cleanup $netns
  pod_forward -D
  # Mounts the kubelet and containerd left (volumes, rootfs, sandbox shm),
  # deepest first, and the links to the pods' logs.
  grep -o " $K8S_DIR/[^ ]*" /proc/mounts | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done || true
  find /var/log/containers -lname "$K8S_DIR/*" -delete 2>/dev/null || true
  rm -rf "$K8S_DIR"
}

# stop NAME: stop the process start NAME started (SIGTERM, then SIGKILL).
stop() {
  local pid
  pid=$(cat "$K8S_DIR/run/$1.pid" 2>/dev/null) || return 0
  kill "$pid" 2>/dev/null || return 0
  wait_for "$1 stopped" 20 sh -c "! kill -0 $pid" || kill -9 "$pid" 2>/dev/null || true
}

case "${1:-}" in
  build) build ;;
  up) up ;;
  load) shift; load "$@" ;;
  down) down ;;
  *) echo "usage: $0 build|up|load IMAGE...|down" >&2; exit 2 ;;
esac
