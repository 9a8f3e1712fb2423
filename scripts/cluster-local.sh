#!/usr/bin/env bash
# A cluster of real nodes on this one machine: each node is a set of Linux namespaces (network,
# hostname, mounts, IPC) with its own hostname, address, /tmp, /dev/shm and /etc/hosts, on a
# private bridge with no uplink. The checkout stays shared, as a cluster's shared filesystem.
# Processes stay in the machine's PID namespace and see its /proc: with a PID namespace per node
# and the machine's /proc, slurmstepd reads /proc/<its own pid> and fails; with a /proc per node,
# mpirun could not reach a sibling node. A node's processes are those in its network namespace.
#
#   scripts/cluster-local.sh up N [--slurm]  nodes n1..nN (idempotent; --slurm adds a head node
#                                            with slurmctld, one slurmd per node, its own munged)
#   scripts/cluster-local.sh down            everything stopped by PID, the bridge removed, no trace
#   scripts/cluster-local.sh status          nodes, addresses, daemons; exit 1 unless all are up
#   scripts/cluster-local.sh exec NODE CMD…  run CMD on NODE (mpirun from there reaches the others)
#   scripts/cluster-local.sh env             the environment that `exec` adds (Open MPI, Slurm)
#   scripts/cluster-local.sh kill NODE       a node dies: every process on it is killed at once
#   scripts/cluster-local.sh cut NODE        its link goes silent (as on a power loss: no RST, no FIN)
#   scripts/cluster-local.sh heal NODE       its link comes back
#
# What a real cluster needs, printed by `up` and `env`:
# - Open MPI: a launcher in place of ssh (plm_rsh_agent: here a script that enters the node's
#   namespaces with nsenter), plm_rsh_no_tree_spawn=1 (a daemon cannot enter a sibling node),
#   pml=ob1, btl=tcp,self,vader, btl_tcp_if_include/oob_tcp_if_include = the cluster subnet, and
#   low oob_tcp_keepalive_* so a silent node is noticed in seconds instead of ~2 hours
#   (the kernel's default) or 5 minutes (Open MPI's default keepalive_time), and
#   odls_base_sigkill_timeout=2 so that learner 0 has time to save when a lost node ends the job.
# - Slurm: SlurmctldHost = the head's hostname, `%n` in slurmd's spool/pid/log paths (several
#   slurmd on one machine), SlurmdParameters=config_overrides (the nodes declare the machine's CPUs
#   each), AuthInfo=cred_expire=10 (a requeued job restarts in ~12 s), its own munged socket.
#
# Traffic never leaves the machine: the bridge has no address on the host side, no uplink, no NAT;
# no node has a default route; the subnet (MPIRL_CLUSTER_SUBNET, default 198.18.77.0/24, from the
# benchmarking range 198.18.0.0/15) is used nowhere else. Not emulated: separate cores, memory and
# disks (all nodes share the machine's), GPUs, a real network's latency and bandwidth.
set -euo pipefail

STATE=${MPIRL_CLUSTER_DIR:-/run/mpirl-cluster}
NET=${MPIRL_CLUSTER_SUBNET:-198.18.77}
BR=mpirl-br0
# Physical paths: the nodes see the checkout through a bind mount (when it is under /tmp), which
# must name the real directory, not a link to it (a tree of links to the checkout, as
# docs.getting_started makes, would otherwise share only the links).
here="$(cd -P "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd -P "$here/.." && pwd)"
# Open MPI's keepalive: first probe after TIME s idle, then every INTVL s, PROBES unanswered -> lost.
KA_TIME=${MPIRL_KEEPALIVE_TIME:-10} KA_INTVL=${MPIRL_KEEPALIVE_INTVL:-5} KA_PROBES=${MPIRL_KEEPALIVE_PROBES:-3}
# Seconds between the daemons' SIGCONT, SIGTERM and SIGKILL when a job is torn down (Open MPI's
# default 1; Open MPI 4 sleeps that long unconditionally, twice): learner 0 saves in that time.
KILL_GRACE=${MPIRL_KILL_GRACE_S:-2}

log() { echo "[cluster-local] $*"; }
die() { echo "[cluster-local] error: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "needs root (namespaces, a bridge)"

node_ip() { # name -> address (head = .10, nK = .10+K)
  case $1 in head) echo "$NET.10" ;; n[0-9]*) echo "$NET.$((10 + ${1#n}))" ;; *) return 1 ;; esac
}
holder_pid() { # name -> pid of the node's holder, if it is alive
  local pid
  pid=$(cat "$STATE/nodes/$1/pid" 2>/dev/null) || return 1
  [ -n "$pid" ] && [ -e "/proc/$pid/ns/net" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = bash ] &&
    [ "$(readlink "/proc/$pid/ns/net")" = "$(cat "$STATE/nodes/$1/netns" 2>/dev/null)" ] && echo "$pid"
}
nodes() { [ -d "$STATE/nodes" ] && ls "$STATE/nodes" | sort -V || true; }

# State left from an earlier boot (a rebooted machine, or a disk image taken while a cluster was up,
# where /run is not a tmpfs) names processes and namespaces that are gone: its pid and netns
# numbers may since belong to new ones (namespace inode numbers restart low at every boot), so
# acting on it could kill a live node or anything else. It is forgotten, not acted on.
BOOT_ID=$(cat /proc/sys/kernel/random/boot_id)
forget_stale_state() {
  [ -d "$STATE" ] || return 0
  [ "$(cat "$STATE/boot_id" 2>/dev/null)" = "$BOOT_ID" ] && return 0
  [ -e "$STATE/boot_id" ] || [ -d "$STATE/nodes" ] || return 0
  log "forgetting $STATE: it is from an earlier boot (nothing of it is running)"
  rm -rf "$STATE"
}

mca_env() { # the environment every command on the cluster gets (Open MPI's MCA parameters, Slurm's)
  cat <<EOF
OMPI_MCA_plm_rsh_agent=$STATE/bin/rsh
OMPI_MCA_plm_rsh_no_tree_spawn=1
OMPI_MCA_pml=ob1
OMPI_MCA_btl=tcp,self,vader
OMPI_MCA_btl_tcp_if_include=$NET.0/24
OMPI_MCA_oob_tcp_if_include=$NET.0/24
OMPI_MCA_oob_tcp_keepalive_time=$KA_TIME
OMPI_MCA_oob_tcp_keepalive_intvl=$KA_INTVL
OMPI_MCA_oob_tcp_keepalive_probes=$KA_PROBES
OMPI_MCA_odls_base_sigkill_timeout=$KILL_GRACE
EOF
  [ -f "$STATE/slurm/slurm.conf" ] && echo "SLURM_CONF=$STATE/slurm/slurm.conf"
  return 0
}

enter() { # name cmd...: run in a node's namespaces
  local name=$1 pid; shift
  pid=$(holder_pid "$name") || die "node $name is not up"
  nsenter -t "$pid" -m -u -n -i --wd="$PWD" -- "$@"
}

write_helpers() {
  mkdir -p "$STATE/bin"
  # The node's first process (it holds the namespaces): hostname, private /tmp and /dev/shm, its
  # /etc/hosts; paths of the shared checkout under /tmp are bound back into the new /tmp.
  cat >"$STATE/bin/holder" <<'EOF'
#!/bin/bash
set -eu
name=$1 state=$2
hostname "$name"
old=$state/nodes/$name/old-tmp
mkdir -p "$old"
mount --bind /tmp "$old"
mount -t tmpfs -o mode=1777,size=2g tmpfs /tmp
while read -r p; do
  case $p in /tmp/?*) mkdir -p "$p"; mount --bind "$old/${p#/tmp/}" "$p" ;; esac
done <"$state/shared-paths"
mount -t tmpfs -o mode=1777,size=2g tmpfs /dev/shm
mount --bind "$state/hosts" /etc/hosts
touch "$state/nodes/$name/ready"
trap 'exit 0' TERM
while :; do sleep 3600 & wait $! || true; done
EOF
  # Open MPI's launcher (plm_rsh_agent): `rsh [options] HOST COMMAND...`, like ssh: the daemon
  # runs in the node's namespaces with a clean environment (PATH and LD_LIBRARY_PATH kept).
  cat >"$STATE/bin/rsh" <<EOF
#!/bin/bash
while [[ \${1:-} == -* ]]; do shift; done
host=\${1:?usage: rsh HOST COMMAND}; shift
name=\$(awk -v h="\$host" '\$1 == h || \$2 == h {print \$2; exit}' "$STATE/hosts")
pid=\$(cat "$STATE/nodes/\${name:-\$host}/pid" 2>/dev/null) || { echo "rsh: no node \$host" >&2; exit 255; }
exec nsenter -t "\$pid" -m -u -n -i --wd=/ -- \
  env -i PATH="\$PATH" LD_LIBRARY_PATH="\${LD_LIBRARY_PATH:-}" HOME="\${HOME:-/root}" /bin/bash -c "\$*"
EOF
  chmod +x "$STATE/bin/holder" "$STATE/bin/rsh"
}

start_node() { # name
  local name=$1 ip pid i
  ip=$(node_ip "$name")
  holder_pid "$name" >/dev/null && return 0
  rm -rf "$STATE/nodes/$name"
  mkdir -p "$STATE/nodes/$name"
  setsid unshare --net --uts --mount --ipc --propagation private \
    /bin/bash "$STATE/bin/holder" "$name" "$STATE" </dev/null >"$STATE/nodes/$name/holder.log" 2>&1 &
  pid=$!
  for ((i = 0; i < 100; i++)); do [ -e "$STATE/nodes/$name/ready" ] && break; sleep 0.05; done
  [ -e "$STATE/nodes/$name/ready" ] || { cat "$STATE/nodes/$name/holder.log" >&2; die "node $name did not start"; }
  echo "$pid" >"$STATE/nodes/$name/pid"
  readlink "/proc/$pid/ns/net" >"$STATE/nodes/$name/netns"
  ip link del "mpirl-$name" 2>/dev/null || true
  ip link add "mpirl-$name" type veth peer name eth0 netns "$pid"
  ip link set "mpirl-$name" master "$BR" up
  nsenter -t "$pid" -n sh -c "ip link set lo up && ip addr add $ip/24 dev eth0 && ip link set eth0 up"
}

# Every process whose network namespace is the node's.
node_procs() { # name
  local ns p
  ns=$(cat "$STATE/nodes/$1/netns" 2>/dev/null) || return 0
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/ns/net" 2>/dev/null)" = "$ns" ] && echo "${p#/proc/}"
  done
  return 0
}

# A node's jobs: its processes less the holder and the holder's sleep.
job_procs() { # name
  local holder p
  holder=$(cat "$STATE/nodes/$1/pid" 2>/dev/null)
  for p in $(node_procs "$1"); do
    [ "$p" = "$holder" ] && continue
    [ "$(awk '{print $4}' "/proc/$p/stat" 2>/dev/null)" = "$holder" ] && [ "$(cat "/proc/$p/comm" 2>/dev/null)" = sleep ] && continue
    echo "$p"
  done
}

kill_node() { # name: SIGKILL to every process of the node at once (again for any forked meanwhile);
  # the namespace closes their sockets as a live node's kernel would, then goes with its last process.
  local name=$1 pids i
  for ((i = 0; i < 100; i++)); do
    pids=$(node_procs "$name" | tr '\n' ' ')
    [ -z "$pids" ] && break
    kill -KILL $pids 2>/dev/null || true
    sleep 0.05
  done
  # The namespace is gone with its last process and its number may be reused by a new one: a dead
  # node's record must not name it (a later `down` would kill whatever has it then).
  [ -z "$pids" ] && rm -f "$STATE/nodes/$name/netns" "$STATE/nodes/$name/pid"
  ip link del "mpirl-$name" 2>/dev/null || true
}

up() {
  local n=${1:-} slurm=${2:-} i names=()
  [[ $n =~ ^[0-9]+$ ]] && ((n >= 1 && n <= 32)) || die "usage: up N [--slurm] (1 <= N <= 32)"
  command -v unshare >/dev/null && command -v nsenter >/dev/null && command -v ip >/dev/null ||
    die "needs util-linux (unshare, nsenter) and iproute2 (ip)"
  mkdir -p "$STATE/nodes"
  echo "$BOOT_ID" >"$STATE/boot_id"
  for ((i = 1; i <= n; i++)); do names+=("n$i"); done
  [ "$slurm" = --slurm ] && names=(head "${names[@]}")
  # nodes beyond N from an earlier `up` are stopped first, before new ones exist
  for i in $(nodes); do
    [[ " ${names[*]} " == *" $i "* ]] || { log "stopping $i (not in this cluster)"; kill_node "$i"; rm -rf "$STATE/nodes/$i"; }
  done
  # /etc/hosts of every node: the nodes, localhost; nothing of the machine's own
  { echo "127.0.0.1 localhost"; echo "::1 localhost ip6-localhost"
    for i in "${names[@]}"; do echo "$(node_ip "$i") $i"; done; } >"$STATE/hosts.new"
  # in place, not by rename: running nodes have the file's inode bind-mounted as their /etc/hosts
  cat "$STATE/hosts.new" >"$STATE/hosts" && rm -f "$STATE/hosts.new"
  { echo "$REPO"; tr ':' '\n' <<<"${MPIRL_CLUSTER_SHARE:-}"; } | grep -v '^$' >"$STATE/shared-paths"
  write_helpers
  ip link show "$BR" >/dev/null 2>&1 || ip link add "$BR" type bridge
  ip link set "$BR" up
  for i in "${names[@]}"; do start_node "$i"; done
  if [ "$slurm" = --slurm ]; then "$here/cluster-slurm.sh" up "$STATE" "$n"; fi
  log "up: ${names[*]} on bridge $BR, subnet $NET.0/24 (state in $STATE)"
  log "Open MPI settings for this cluster (\`$0 env\`):"
  mca_env | sed 's/^/    /'
}

down() {
  local i
  [ -x "$here/cluster-slurm.sh" ] && [ -d "$STATE/slurm" ] && "$here/cluster-slurm.sh" down "$STATE" || true
  for i in $(nodes); do kill_node "$i"; done
  ip link del "$BR" 2>/dev/null || true
  rm -rf "$STATE"
  log "down"
}

status() {
  local i ok=0 pid
  [ -d "$STATE/nodes" ] || { echo "no cluster (scripts/cluster-local.sh up N)"; return 1; }
  for i in $(nodes); do
    if pid=$(holder_pid "$i"); then
      echo "$i: up  $(node_ip "$i")  holder pid $pid  processes $(job_procs "$i" | wc -l)  link $(cat "/sys/class/net/mpirl-$i/operstate" 2>/dev/null || echo gone)"
    else
      echo "$i: down"; ok=1
    fi
  done
  [ -d "$STATE/slurm" ] && { "$here/cluster-slurm.sh" status "$STATE" || ok=1; }
  return $ok
}

cmd=${1:-}; shift || true
forget_stale_state
case $cmd in
  up) up "$@" ;;
  down) down ;;
  status) status ;;
  env) mca_env ;;
  exec)
    name=${1:?usage: exec NODE CMD...}; shift
    (($#)) || die "usage: exec NODE CMD..."
    mapfile -t extra < <(mca_env)
    enter "$name" env "${extra[@]}" "$@"
    ;;
  kill) [ -n "${1:-}" ] && [ -d "$STATE/nodes/$1" ] || die "usage: kill NODE (an up node)"; kill_node "$1"; log "killed $1" ;;
  cut) ip link set "mpirl-${1:?usage: cut NODE}" down && log "cut $1's link" ;;
  heal) ip link set "mpirl-${1:?usage: heal NODE}" up && log "healed $1's link" ;;
  *) die "usage: $0 up N [--slurm] | down | status | exec NODE CMD... | env | kill NODE | cut NODE | heal NODE" ;;
esac
