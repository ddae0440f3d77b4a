#!/usr/bin/env bash
# A real single-node Kubernetes cluster on this machine, for the tests:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and
# kube-proxy built from the Go module proxy (hack/envtest/build.sh, the
# envtest version), with Debian's containerd, runc and CNI plugins.
#
#   hack/cluster/cluster.sh up            start it (tearing down a previous one first)
#   hack/cluster/cluster.sh import TAR... import image archives into the node
#   hack/cluster/cluster.sh exec CMD...   run CMD in the cluster's network (KUBECONFIG set)
#   hack/cluster/cluster.sh down          stop it and remove every trace
#   hack/cluster/cluster.sh check-clean   fail if any trace of a cluster is left
#
# Everything runs in a network namespace of its own ($NETNS): cni0, the pod
# network, the Service IPs, kube-proxy's iptables chains and the sysctls it
# needs live and die there, and no packet of the cluster can leave the
# machine (the namespace's only route out is a bridge with no ports). The node's
# state lives under $STATE and $RUN, its pods' cgroups under /$NETNS in each
# cgroup hierarchy, so `down` knows exactly what to remove, and removes it
# even after a failed `up`. See hack/cluster/README.md.
set -euo pipefail

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_root=$(cd "${script_dir}/../.." && pwd)

NETNS=${CLUSTER_NETNS:-faucet-e2e}
NODE=${NETNS}
STATE=${CLUSTER_STATE:-/var/lib/${NETNS}}
RUN=/run/${NETNS}
LOGS=${CLUSTER_LOGS:-${repo_root}/bin/cluster-logs}
K8S_BIN=${K8S_BIN:-${repo_root}/bin/k8s/1.37.0}
# The cluster's DNS (hack/clusterdns): Service names, as a DNS add-on
# answers them. make builds it.
CLUSTERDNS=${CLUSTERDNS:-${repo_root}/bin/clusterdns}
NODE_IP=10.250.0.1
POD_CIDR=10.244.0.0/24
SERVICE_CIDR=10.96.0.0/24
API_SERVICE_IP=10.96.0.1
PAUSE_IMAGE=localhost/faucet-e2e/pause:1
CNI_BIN=/usr/lib/cni
CGROUP_ROOT=/${NETNS}
KUBECONFIG_ADMIN=${STATE}/pki/admin.kubeconfig
# Host paths the kubelet, containerd and CNI use whatever they are told
# (device plugins, the legacy container log links, CNI's result cache, the
# shim's sockets, pinned network namespaces). `up` records the ones that did
# not exist; `down` removes those.
HOST_DIRS=(/var/lib/kubelet /var/log/containers /var/lib/cni /run/containerd /run/netns)
# The order components start in; `down` stops them in reverse.
COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler containerd clusterdns kubelet kube-proxy)

log() { echo "cluster: $*" >&2; }
die() { log "$*"; exit 1; }
in_ns() { nsenter --net="/run/netns/${NETNS}" -- "$@"; }
kubectl() { in_ns "${K8S_BIN}/kubectl" --kubeconfig "${KUBECONFIG_ADMIN}" "$@"; }
ctr() { command ctr --address "${RUN}/containerd.sock" --namespace k8s.io "$@"; }

# wait_for DESCRIPTION SECONDS CMD...: poll CMD every half second.
wait_for() {
	local what=$1 secs=$2
	shift 2
	local deadline=$((SECONDS + secs))
	until "$@" >/dev/null 2>&1; do
		((SECONDS < deadline)) || { log "timed out after ${secs}s waiting for ${what}"; return 1; }
		sleep 0.5
	done
}

# start NAME CMD...: run CMD in the cluster's network namespace, in a
# session of its own, logging to $LOGS/NAME.log; its PID goes to
# $RUN/NAME.pid (setsid and nsenter exec, so it is the component's own PID).
start() {
	local name=$1
	shift
	log "starting ${name}"
	setsid nsenter --net="/run/netns/${NETNS}" -- "$@" >"${LOGS}/${name}.log" 2>&1 </dev/null &
	echo $! >"${RUN}/${name}.pid"
}

running() { [[ -f "${RUN}/$1.pid" ]] && kill -0 "$(cat "${RUN}/$1.pid")" 2>/dev/null; }

# Readiness checks for wait_for.
etcd_healthy() { running etcd && in_ns curl -sf http://127.0.0.1:2379/health; }
apiserver_ready() {
	local d=${STATE}/pki
	running kube-apiserver && in_ns curl -sf --cacert "$d/ca.crt" --cert "$d/admin.crt" --key "$d/admin.key" https://127.0.0.1:6443/readyz
}
containerd_ready() { running containerd && ctr version; }
node_ready() { running kubelet && kubectl wait --for=condition=Ready "node/${NODE}" --timeout=2s; }
no_tasks() { [[ -z $(ctr tasks ls -q 2>/dev/null) ]]; }

# alive NAME: fail with the tail of its log when NAME has exited.
alive() {
	running "$1" && return 0
	log "$1 exited; the end of ${LOGS}/$1.log:"
	tail -n 30 "${LOGS}/$1.log" >&2 || true
	return 1
}

ensure_packages() {
	local missing=()
	command -v containerd >/dev/null || missing+=(containerd)
	command -v runc >/dev/null || missing+=(runc)
	[[ -x ${CNI_BIN}/bridge && -x ${CNI_BIN}/host-local && -x ${CNI_BIN}/portmap && -x ${CNI_BIN}/loopback ]] || missing+=(containernetworking-plugins)
	command -v iptables >/dev/null || missing+=(iptables)
	command -v conntrack >/dev/null || missing+=(conntrack)
	command -v ip >/dev/null || missing+=(iproute2)
	command -v openssl >/dev/null || missing+=(openssl)
	((${#missing[@]} == 0)) && return 0
	# shellcheck source=hack/apt-install.sh
	source "${repo_root}/hack/apt-install.sh"
	local p
	for p in "${missing[@]}"; do
		apt_install "$p" "the real-cluster tests need it" "install Debian's ${missing[*]} by hand."
	done
}

preflight() {
	[[ $(id -u) -eq 0 ]] || die "a kubelet needs root: run as root"
	local b
	for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl; do
		[[ -x ${K8S_BIN}/${b} ]] || die "${K8S_BIN}/${b} is missing: run hack/envtest/build.sh --cluster"
	done
	[[ -x ${CLUSTERDNS} ]] || die "${CLUSTERDNS} is missing: go build -o ${CLUSTERDNS} ./hack/clusterdns"
	ensure_packages
}

# --- PKI: one CA; a serving cert for the API server, client certs for the rest.

pki() {
	local d=${STATE}/pki
	mkdir -p "$d"
	log "writing the PKI"
	openssl ecparam -name prime256v1 -genkey -noout -out "$d/ca.key" 2>/dev/null
	openssl req -x509 -new -key "$d/ca.key" -subj "/CN=${NETNS}-ca" -days 2 -out "$d/ca.crt" 2>/dev/null
	# The service-account token signing key.
	openssl ecparam -name prime256v1 -genkey -noout -out "$d/sa.key" 2>/dev/null
	openssl ec -in "$d/sa.key" -pubout -out "$d/sa.pub" 2>/dev/null
	cert apiserver "/CN=kube-apiserver" "subjectAltName=IP:127.0.0.1,IP:${NODE_IP},IP:${API_SERVICE_IP},DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc" serverAuth
	cert admin "/O=system:masters/CN=${NETNS}-admin" "" clientAuth
	cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "" clientAuth
	cert controller-manager "/CN=system:kube-controller-manager" "" clientAuth
	cert scheduler "/CN=system:kube-scheduler" "" clientAuth
	cert kubelet "/O=system:nodes/CN=system:node:${NODE}" "" clientAuth
	cert kube-proxy "/CN=system:kube-proxy" "" clientAuth
	local c
	for c in admin controller-manager scheduler kubelet kube-proxy; do
		kubeconfig "$c"
	done
}

# cert NAME SUBJECT SAN USAGE
cert() {
	local d=${STATE}/pki name=$1 subj=$2 san=$3 usage=$4
	local ext="basicConstraints=critical,CA:FALSE"$'\n'"keyUsage=critical,digitalSignature,keyEncipherment"$'\n'"extendedKeyUsage=${usage}"
	[[ -n $san ]] && ext+=$'\n'"${san}"
	openssl ecparam -name prime256v1 -genkey -noout -out "$d/${name}.key" 2>/dev/null
	openssl req -new -key "$d/${name}.key" -subj "${subj}" -out "$d/${name}.csr" 2>/dev/null
	openssl x509 -req -in "$d/${name}.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -days 2 \
		-extfile <(echo "$ext") -out "$d/${name}.crt" 2>/dev/null
	rm -f "$d/${name}.csr"
}

# kubeconfig NAME: NAME.crt/key against the API server on the node IP.
kubeconfig() {
	local d=${STATE}/pki
	cat >"$d/$1.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: ${NETNS}
  cluster:
    server: https://${NODE_IP}:6443
    certificate-authority: $d/ca.crt
users:
- name: $1
  user:
    client-certificate: $d/$1.crt
    client-key: $d/$1.key
contexts:
- name: $1@${NETNS}
  context: {cluster: ${NETNS}, user: $1}
current-context: $1@${NETNS}
EOF
}

# --- The network namespace: loopback, the node's address on a link that also
# takes every route out, and the sysctls a node needs.

network() {
	log "creating network namespace ${NETNS} (node ${NODE_IP}, pods ${POD_CIDR}, services ${SERVICE_CIDR})"
	ip netns add "${NETNS}"
	ip -n "${NETNS}" link set lo up
	# A bridge with no ports: it holds the node's address, and whatever is
	# routed out through it goes nowhere (no dummy links in this kernel).
	ip -n "${NETNS}" link add node0 type bridge
	ip -n "${NETNS}" addr add "${NODE_IP}/32" dev node0
	ip -n "${NETNS}" link set node0 up
	ip -n "${NETNS}" route add default dev node0
	in_ns sysctl -qw net.ipv4.ip_forward=1
	# Pod-to-Service-to-pod on one bridge needs bridged traffic to pass
	# iptables, or replies bypass the Service's DNAT.
	in_ns sysctl -qw net.bridge.bridge-nf-call-iptables=1
	in_ns sysctl -qw net.bridge.bridge-nf-call-ip6tables=1
	mkdir -p "${STATE}/cni/net.d" "${STATE}/cni/ipam"
	cat >"${STATE}/cni/net.d/10-${NETNS}.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "${NETNS}",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "${STATE}/cni/ipam",
        "ranges": [[{"subnet": "${POD_CIDR}"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
	# The node's own resolver, which pods with dnsPolicy Default get: a
	# lookup must fail at once on the pod's own loopback rather than go
	# anywhere else. Pods of the default policy, ClusterFirst, ask
	# clusterdns on the node's address instead (kubelet.yaml).
	printf 'nameserver 127.0.0.1\noptions attempts:1 timeout:1\n' >"${STATE}/resolv.conf"
}

control_plane() {
	mkdir -p "${STATE}/etcd"
	start etcd "${K8S_BIN}/etcd" --name "${NETNS}" --data-dir "${STATE}/etcd" \
		--listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
		--listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
		--initial-cluster "${NETNS}=http://127.0.0.1:2380" --unsafe-no-fsync --log-level warn
	wait_for "etcd" 30 etcd_healthy || { alive etcd; return 1; }

	local d=${STATE}/pki
	start kube-apiserver "${K8S_BIN}/kube-apiserver" \
		--etcd-servers http://127.0.0.1:2379 \
		--bind-address 0.0.0.0 --secure-port 6443 --advertise-address "${NODE_IP}" \
		--service-cluster-ip-range "${SERVICE_CIDR}" \
		--client-ca-file "$d/ca.crt" --tls-cert-file "$d/apiserver.crt" --tls-private-key-file "$d/apiserver.key" \
		--kubelet-client-certificate "$d/apiserver-kubelet-client.crt" --kubelet-client-key "$d/apiserver-kubelet-client.key" \
		--service-account-issuer https://kubernetes.default.svc --service-account-key-file "$d/sa.pub" \
		--service-account-signing-key-file "$d/sa.key" \
		--kubelet-preferred-address-types InternalIP \
		--authorization-mode Node,RBAC --allow-privileged=true --profiling=false
	wait_for "the API server" 90 apiserver_ready || { alive kube-apiserver; return 1; }

	start kube-controller-manager "${K8S_BIN}/kube-controller-manager" \
		--kubeconfig "$d/controller-manager.kubeconfig" \
		--authentication-kubeconfig "$d/controller-manager.kubeconfig" --authorization-kubeconfig "$d/controller-manager.kubeconfig" \
		--bind-address 127.0.0.1 --leader-elect=false --use-service-account-credentials \
		--service-account-private-key-file "$d/sa.key" --root-ca-file "$d/ca.crt" \
		--cluster-signing-cert-file "$d/ca.crt" --cluster-signing-key-file "$d/ca.key" \
		--service-cluster-ip-range "${SERVICE_CIDR}"
	start kube-scheduler "${K8S_BIN}/kube-scheduler" \
		--kubeconfig "$d/scheduler.kubeconfig" \
		--authentication-kubeconfig "$d/scheduler.kubeconfig" --authorization-kubeconfig "$d/scheduler.kubeconfig" \
		--bind-address 127.0.0.1 --leader-elect=false
}

runtime() {
	mkdir -p "${STATE}/containerd" "${RUN}/containerd"
	cat >"${STATE}/containerd.toml" <<EOF
version = 2
root = "${STATE}/containerd"
state = "${RUN}/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]

[grpc]
  address = "${RUN}/containerd.sock"

[plugins."io.containerd.internal.v1.opt"]
  path = "${STATE}/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${PAUSE_IMAGE}"
  # This machine lacks CAP_SYS_RESOURCE: without this every sandbox fails
  # with "can't get final child's PID from pipe: EOF".
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "${CNI_BIN}"
    conf_dir = "${STATE}/cni/net.d"
EOF
	start containerd containerd --config "${STATE}/containerd.toml"
	wait_for "containerd" 30 containerd_ready || { alive containerd; return 1; }
}

# import TAR...: load image archives into the node's image store.
import_images() {
	local tar
	for tar in "$@"; do
		log "importing $(basename "$tar")"
		ctr images import "$tar" >&2
	done
}

node() {
	local d=${STATE}/pki c
	# The pods' cgroups go under /$NETNS in every hierarchy, which `down`
	# removes whole.
	for c in /sys/fs/cgroup/*/; do
		[[ -d "$c" && -w "$c" ]] && mkdir -p "${c}${CGROUP_ROOT#/}"
	done
	mkdir -p "${STATE}/kubelet"
	cat >"${STATE}/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: ${NODE_IP}
port: 10250
readOnlyPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $d/ca.crt}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://${RUN}/containerd.sock
imageServiceEndpoint: unix://${RUN}/containerd.sock
# This machine runs cgroup v1 (kubelet 1.37 refuses it unless told), has
# swap settings of its own and no room for eviction or reserved resources
# to matter.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupsPerQOS: true
cgroupRoot: ${CGROUP_ROOT}
failSwapOn: false
evictionHard: {}
enforceNodeAllocatable: []
localStorageCapacityIsolation: false
imageGCHighThresholdPercent: 100
resolvConf: ${STATE}/resolv.conf
clusterDNS: [${NODE_IP}]
podLogsDir: ${STATE}/pod-logs
clusterDomain: cluster.local
serializeImagePulls: false
syncFrequency: 5s
fileCheckFrequency: 5s
nodeStatusUpdateFrequency: 5s
EOF
	start clusterdns "${CLUSTERDNS}" --kubeconfig "${KUBECONFIG_ADMIN}" --listen "${NODE_IP}:53"
	start kubelet "${K8S_BIN}/kubelet" --config "${STATE}/kubelet.yaml" --kubeconfig "$d/kubelet.kubeconfig" \
		--root-dir "${STATE}/kubelet" --cert-dir "${STATE}/kubelet/pki" \
		--hostname-override "${NODE}" --node-ip "${NODE_IP}"

	cat >"${STATE}/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: {kubeconfig: $d/kube-proxy.kubeconfig}
hostnameOverride: ${NODE}
clusterCIDR: ${POD_CIDR}
bindAddress: ${NODE_IP}
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# The conntrack table of a network namespace is not kube-proxy's to size.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
	start kube-proxy "${K8S_BIN}/kube-proxy" --config "${STATE}/kube-proxy.yaml"

	wait_for "node ${NODE} to be Ready" 120 node_ready ||
		{ alive kubelet; alive kube-proxy; kubectl describe node "${NODE}" >&2 || true; return 1; }
	wait_for "the default ServiceAccount" 60 kubectl -n default get serviceaccount default || { alive kube-controller-manager; return 1; }
	alive kube-proxy
	alive kube-scheduler
}

up() {
	preflight
	if [[ -e "/run/netns/${NETNS}" || -d "${STATE}" || -d "${RUN}" ]]; then
		log "a previous cluster was left behind; removing it first"
		down
	fi
	local start_s=${SECONDS}
	rm -rf "${LOGS}"
	mkdir -p "${STATE}" "${RUN}" "${LOGS}"
	ls -d /run/netns/cni-* >"${RUN}/netns-before" 2>/dev/null || true
	local d
	for d in "${HOST_DIRS[@]}"; do
		[[ -e $d ]] || echo "$d" >>"${STATE}/host-dirs-created"
	done
	network
	pki
	control_plane
	runtime
	[[ -n ${PAUSE_ARCHIVE:-} ]] && import_images "${PAUSE_ARCHIVE}"
	node
	log "cluster up in $((SECONDS - start_s))s: kubeconfig ${KUBECONFIG_ADMIN} (use it through: $0 exec kubectl ...)"
}

# --- Teardown: workloads first (so CNI DEL runs), then every component by its
# PID, then what the kernel still holds for them.

stop_pid() { # stop_pid NAME PID
	local name=$1 pid=$2 i
	kill -0 "$pid" 2>/dev/null || return 0
	kill -TERM "$pid" 2>/dev/null || true
	for i in $(seq 1 40); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.25
	done
	log "${name} (pid ${pid}) ignored SIGTERM for 10s; killing it"
	kill -KILL "$pid" 2>/dev/null || true
	for i in $(seq 1 20); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.25
	done
}

# our_pids: every live process started from our binaries or holding our
# sockets, state or network namespace (shims, runc, container processes).
our_pids() {
	local p exe ns target
	target=$(stat -L -c %i "/run/netns/${NETNS}" 2>/dev/null || echo none)
	# Container processes: whatever is in a cgroup of ours.
	find /sys/fs/cgroup/*/"${CGROUP_ROOT#/}" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -un
	for p in /proc/[0-9]*; do
		p=${p#/proc/}
		[[ $p == "$$" ]] && continue
		exe=$(readlink "/proc/$p/exe" 2>/dev/null) || continue
		if [[ $exe == "${K8S_BIN}"/* ]] || tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -qF -e "${RUN}/" -e "${STATE}/"; then
			echo "$p"
			continue
		fi
		ns=$(stat -L -c %i "/proc/$p/ns/net" 2>/dev/null) || continue
		[[ $ns == "$target" ]] && echo "$p"
	done
}

down() {
	local start_s=${SECONDS}
	if [[ -e "/run/netns/${NETNS}" ]] && running kube-apiserver && running kubelet; then
		log "deleting workloads"
		local ns
		for ns in $(kubectl get ns -o jsonpath='{.items[*].metadata.name}' 2>/dev/null); do
			case $ns in default | kube-system | kube-public | kube-node-lease) ;; *) kubectl delete ns "$ns" --wait=false >/dev/null 2>&1 || true ;; esac
		done
		kubectl delete pods --all -A --grace-period=2 --wait=false >/dev/null 2>&1 || true
		# The kubelet stops each pod's sandbox, which runs CNI DEL.
		wait_for "the pods to go" 60 no_tasks || true
	fi
	local i name
	for ((i = ${#COMPONENTS[@]} - 1; i >= 0; i--)); do
		name=${COMPONENTS[i]}
		if [[ $name == containerd && -S "${RUN}/containerd.sock" ]] && running containerd; then
			# Containers the kubelet did not stop: kill their tasks so no
			# shim outlives containerd.
			local id
			for id in $(ctr containers ls -q 2>/dev/null); do
				ctr tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
				ctr tasks delete -f "$id" >/dev/null 2>&1 || true
			done
		fi
		[[ -f "${RUN}/${name}.pid" ]] && stop_pid "$name" "$(cat "${RUN}/${name}.pid")"
	done
	# Shims, runc and container processes that outlived their parents.
	local p
	for p in $(our_pids); do
		log "killing leftover process ${p}: $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-120)"
		kill -KILL "$p" 2>/dev/null || true
	done
	sleep 0.5
	if [[ -e "/run/netns/${NETNS}" ]]; then
		# kube-proxy's and CNI's iptables chains and cni0 go with the
		# namespace; remove them explicitly first so a kernel that keeps a
		# namespace alive (a leaked reference) keeps nothing of ours in it.
		[[ -x "${K8S_BIN}/kube-proxy" ]] && in_ns "${K8S_BIN}/kube-proxy" --cleanup >/dev/null 2>&1 || true
		local t c
		for t in iptables ip6tables; do
			for c in $(in_ns "$t-save" 2>/dev/null | sed -n 's/^:\(KUBE-[^ ]*\|CNI-[^ ]*\) .*/\1/p' | sort -u); do
				in_ns "$t" -t nat -F "$c" 2>/dev/null || true
				in_ns "$t" -t filter -F "$c" 2>/dev/null || true
			done
		done
		in_ns ip link del cni0 2>/dev/null || true
		ip netns del "${NETNS}" || true
	fi
	# Mounts under our directories (kubelet volumes, rootfs, shm), and the
	# pod network namespaces containerd pinned: deepest first.
	local m
	while read -r m; do
		umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "cannot unmount $m"
	done < <(our_mounts | sort -r)
	for m in $(pod_netns); do
		umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
		rm -f "$m"
	done
	remove_cgroups
	# What the node put outside our directories: whole directories it
	# created, else only its own entries.
	find /var/log/containers -maxdepth 1 -type l -lname "${STATE}/*" -delete 2>/dev/null || true
	rm -f /var/lib/cni/results/"${NETNS}"-* 2>/dev/null || true
	if [[ -f "${STATE}/host-dirs-created" ]]; then
		while read -r d; do
			if [[ $d == /run/netns ]]; then
				# ip netns made it a mount point; other namespaces may
				# have appeared in it since.
				umount /run/netns 2>/dev/null || true
				rmdir /run/netns 2>/dev/null || true
			else
				rm -rf "$d"
			fi
		done <"${STATE}/host-dirs-created"
	fi
	rm -rf "${RUN}" "${STATE}"
	log "cluster down in $((SECONDS - start_s))s"
}

our_mounts() {
	awk -v a="${STATE}" -v b="${RUN}" '$5 == a || index($5, a "/") == 1 || $5 == b || index($5, b "/") == 1 { print $5 }' /proc/self/mountinfo
}

# pod_netns: the pod network namespaces containerd pinned under /run/netns
# (cni-<uuid>) since `up`, which recorded the ones that were there before.
pod_netns() {
	local f
	for f in /run/netns/cni-*; do
		[[ -e $f ]] || continue
		[[ -f "${RUN}/netns-before" ]] && grep -qxF "$f" "${RUN}/netns-before" && continue
		echo "$f"
	done
}

remove_cgroups() {
	local c dir
	for c in /sys/fs/cgroup/*/; do
		dir="${c}${CGROUP_ROOT#/}"
		[[ -d $dir ]] || continue
		# Depth first: a cgroup directory can only go once it has no children.
		find "$dir" -depth -type d -exec rmdir {} + 2>/dev/null || true
		[[ -d $dir ]] && log "cannot remove cgroup ${dir}"
	done
	return 0
}

# check_clean: fail, naming it, when anything of a cluster is left.
check_clean() {
	local dirty=0 t
	[[ -e "/run/netns/${NETNS}" ]] && { log "left: network namespace ${NETNS}"; dirty=1; }
	ip link show cni0 >/dev/null 2>&1 && { log "left: cni0"; dirty=1; }
	for t in iptables ip6tables; do
		if command -v "$t-save" >/dev/null && "$t-save" 2>/dev/null | grep -qE '^:(KUBE-|CNI-)'; then
			log "left: ${t} chains $("$t-save" | grep -oE '^:(KUBE-|CNI-)[^ ]*' | tr '\n' ' ')"
			dirty=1
		fi
	done
	[[ -n $(our_mounts) ]] && { log "left: mounts $(our_mounts | tr '\n' ' ')"; dirty=1; }
	[[ -n $(our_pids) ]] && { log "left: processes $(our_pids | tr '\n' ' ')"; dirty=1; }
	local c
	for c in /sys/fs/cgroup/*/; do
		[[ -d "${c}${CGROUP_ROOT#/}" ]] && { log "left: cgroup ${c}${CGROUP_ROOT#/}"; dirty=1; }
	done
	[[ -d ${STATE} || -d ${RUN} ]] && { log "left: ${STATE} or ${RUN}"; dirty=1; }
	[[ -n $(find /var/log/containers -maxdepth 1 -type l -lname "${STATE}/*" 2>/dev/null) ]] && { log "left: links in /var/log/containers"; dirty=1; }
	compgen -G "/var/lib/cni/results/${NETNS}-*" >/dev/null && { log "left: CNI results in /var/lib/cni/results"; dirty=1; }
	((dirty == 0)) && log "clean: no namespace, cni0, KUBE-/CNI- chains, mounts, processes or cgroups of a cluster"
	return "$dirty"
}

cmd=${1:-}
shift || true
case $cmd in
up) up ;;
down) down ;;
import) import_images "$@" ;;
exec)
	[[ -e "/run/netns/${NETNS}" ]] || die "no cluster is up"
	KUBECONFIG=${KUBECONFIG_ADMIN} in_ns "$@"
	;;
check-clean) check_clean ;;
kubeconfig) echo "${KUBECONFIG_ADMIN}" ;;
*) die "usage: $0 up|down|import TAR...|exec CMD...|check-clean|kubeconfig" ;;
esac
