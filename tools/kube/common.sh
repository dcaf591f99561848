# shellcheck shell=bash
# shellcheck disable=SC2034  # the variables are used by the scripts that source this file
# Shared by tools/kube/{build,up,down,selftest,rotate-token}. Sourced, never run.
#
# Every knob is a JOBDISPATCH_KUBE_* variable. The versions are the set that was built and run
# (docs/specs/0009-kubernetes-observed.md); changing one builds a new cache folder.

# Go is at /usr/local/go on these machines; a shell without it on PATH still finds it.
command -v go >/dev/null 2>&1 || PATH=$PATH:/usr/local/go/bin

KUBE_VERSION=${JOBDISPATCH_KUBE_K8S_VERSION:-v1.36.3}
ETCD_VERSION=${JOBDISPATCH_KUBE_ETCD_VERSION:-v3.6.16}
KWOK_VERSION=${JOBDISPATCH_KUBE_KWOK_VERSION:-v0.8.0}
JOBSET_VERSION=${JOBDISPATCH_KUBE_JOBSET_VERSION:-v0.12.0}
TRAINER_VERSION=${JOBDISPATCH_KUBE_TRAINER_VERSION:-v2.2.1}
KUEUE_VERSION=${JOBDISPATCH_KUBE_KUEUE_VERSION:-v0.19.2}

# The build cache lives outside any clone, so a fresh clone (CI) on a warm machine builds nothing.
# RECIPE names the build flags: bump it when they change, so stale binaries are not reused.
KUBE_RECIPE=r1
KUBE_CACHE=${JOBDISPATCH_KUBE_CACHE:-/var/cache/jobdispatch-kube}
KUBE_KEY=k8s-${KUBE_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}_jobset-${JOBSET_VERSION}_trainer-${TRAINER_VERSION}_${KUBE_RECIPE}
KUBE_BIN=$KUBE_CACHE/$KUBE_KEY/bin
KUEUE_BIN=$KUBE_CACHE/kueue-${KUEUE_VERSION}_k8s-${KUBE_VERSION}_${KUBE_RECIPE}/bin

KUBE_STATE=${JOBDISPATCH_KUBE_STATE:-/var/lib/jobdispatch-kube}
KUBE_NODES=${JOBDISPATCH_KUBE_NODES:-3}
KUBE_NODE_CPU=${JOBDISPATCH_KUBE_NODE_CPU:-8}
KUBE_NODE_MEMORY=${JOBDISPATCH_KUBE_NODE_MEMORY:-32Gi}
KUBE_NODE_GPU=${JOBDISPATCH_KUBE_NODE_GPU:-8}
KUBE_NAMESPACE=${JOBDISPATCH_KUBE_NAMESPACE:-dispatch}
KUBE_TOKEN_SECONDS=${JOBDISPATCH_KUBE_TOKEN_SECONDS:-86400}

# Ports, all on 127.0.0.1.
KUBE_API_PORT=${JOBDISPATCH_KUBE_API_PORT:-6443}
ETCD_CLIENT_PORT=${JOBDISPATCH_KUBE_ETCD_PORT:-2379}
ETCD_PEER_PORT=$((ETCD_CLIENT_PORT + 1))
KCM_PORT=${JOBDISPATCH_KUBE_KCM_PORT:-10257}
SCHED_PORT=${JOBDISPATCH_KUBE_SCHEDULER_PORT:-10259}
KWOK_PORT=${JOBDISPATCH_KUBE_KWOK_PORT:-10250}
JOBSET_WEBHOOK_PORT=${JOBDISPATCH_KUBE_JOBSET_WEBHOOK_PORT:-19443}
JOBSET_HEALTH_PORT=${JOBDISPATCH_KUBE_JOBSET_HEALTH_PORT:-18081}
TRAINER_WEBHOOK_PORT=${JOBDISPATCH_KUBE_TRAINER_WEBHOOK_PORT:-19445}
TRAINER_HEALTH_PORT=${JOBDISPATCH_KUBE_TRAINER_HEALTH_PORT:-18083}
TRAINER_STATUS_PORT=${JOBDISPATCH_KUBE_TRAINER_STATUS_PORT:-18443}
KUEUE_WEBHOOK_PORT=${JOBDISPATCH_KUBE_KUEUE_WEBHOOK_PORT:-19447}
KUEUE_HEALTH_PORT=${JOBDISPATCH_KUBE_KUEUE_HEALTH_PORT:-18085}

RUN_DIR=$KUBE_STATE/run
LOG_DIR=$KUBE_STATE/log
PKI=$KUBE_STATE/pki
CFG=$KUBE_STATE/config
ADMIN_KUBECONFIG=$PKI/admin.kubeconfig
ADAPTER_KUBECONFIG=$KUBE_STATE/adapter.kubeconfig
TOKEN_FILE=$KUBE_STATE/adapter.token

SERVICE=kube POLL_SECONDS=0.3 LOG_LINES=40 STOP_SECONDS=15
# shellcheck source=../lib/daemons.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/daemons.sh"

# The admin's kubectl (client certificate in system:masters), for setting the cluster up.
kc() { "$KUBE_BIN/kubectl" --kubeconfig="$ADMIN_KUBECONFIG" "$@"; }

# https_ok URL: the URL answers 200 over TLS (self-signed component certificates: -k).
https_ok() { curl -fsk --max-time 3 "$1" >/dev/null; }

# module_dir MODULE@VERSION: the read-only directory of a module in the Go module cache
# (downloaded when missing). CRDs, manifests and kwok stages are read from there at start.
module_dir() {
  (cd / && go mod download -json "$1") \
    | python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(d.get("Error")) if d.get("Error") else print(d["Dir"])'
}

# ---------------------------------------------------------------------------- the real node
# One real kubelet beside the kwok nodes (tools/kube/up --real-node; README "Real node"). Its
# programs come from Debian (runc, containerd, the CNI plugins, debootstrap), the kubelet and the
# pause container from k8s.io/kubernetes at KUBE_VERSION, CoreDNS from its module; its images are
# made here from Debian's packages. Each is cached under KUBE_CACHE by the versions that make it.
COREDNS_VERSION=${JOBDISPATCH_KUBE_COREDNS_VERSION:-v1.15.0}
NODE_SUITE=${JOBDISPATCH_KUBE_NODE_SUITE:-bookworm}
NODE_MIRROR=${JOBDISPATCH_KUBE_NODE_MIRROR:-http://deb.debian.org/debian}
NODE_PACKAGES=(runc containerd containernetworking-plugins debootstrap)
COREDNS_BIN=$KUBE_CACHE/coredns-${COREDNS_VERSION}_${KUBE_RECIPE}/bin
REAL_NODE=${JOBDISPATCH_KUBE_REAL_NODE_NAME:-realnode-1}
NODE_NETNS=jobdispatch-node
NODE_SUBNET=10.88.0
NODE_IP=$NODE_SUBNET.1
KUBELET_PORT=${JOBDISPATCH_KUBE_KUBELET_PORT:-21250}
NODE_CGROUP=jobdispatch-realnode
NODE_STATE=$KUBE_STATE/node
# containerd's root outlives `down` (even with WIPE): the images imported into it are the slow
# part of a cold start, and a warm machine imports nothing.
NODE_CONTAINERD_ROOT=$KUBE_CACHE/containerd-root
PAUSE_IMAGE=dispatch.local/pause:$KUBE_VERSION

# debian_version PACKAGE: the version apt would install (the candidate), for cache keys.
debian_version() { apt-cache policy "$1" 2>/dev/null | sed -n 's/^ *Candidate: //p'; }

# The torch image's name and cache folder, from the suite and python3-torch's version.
torch_image_key() {
  local v; v=$(debian_version python3-torch)
  [ -n "$v" ] && [ "$v" != "(none)" ] || return 1
  v=${v//[^A-Za-z0-9.]/-}
  echo "torch-image-${NODE_SUITE}_python3-torch-${v}_${KUBE_RECIPE}"
}
torch_image_name() { echo "dispatch.local/torch:${1#torch-image-}"; }

# install_node_packages: Debian's runc, containerd, CNI plugins and debootstrap, when missing.
install_node_packages() {
  local p missing=()
  for p in "${NODE_PACKAGES[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  say "apt-get install ${missing[*]}"
  compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null || apt-get -o DPkg::Lock::Timeout=600 update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -o DPkg::Lock::Timeout=600 -y -q --no-install-recommends "${missing[@]}" >/dev/null \
    || die "apt-get install ${missing[*]} failed"
}
