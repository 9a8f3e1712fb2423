#!/usr/bin/env bash
# Slurm on the namespace cluster of scripts/cluster-local.sh (called by it: `up N --slurm`, `down`,
# `status`): its own munged (socket and key in the cluster's state directory), slurmctld on the
# node `head`, one slurmd per node n1..nN, each in its node's namespaces. Independent of
# scripts/slurm-local.sh's one-node Slurm (own config, ports in other network namespaces, own
# munge socket), so both may run at once. Clients use SLURM_CONF=$STATE/slurm/slurm.conf, which
# `cluster-local.sh exec` sets.
#   cluster-slurm.sh up STATE N | down STATE | status STATE
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cmd=${1:?usage: cluster-slurm.sh up STATE N | down STATE | status STATE}
STATE=${2:?state directory}
N=${3:-0}
S=$STATE/slurm
M=$STATE/munge
CONF=$S/slurm.conf
WAIT_S=${SLURM_LOCAL_WAIT_S:-60}

log() { echo "[cluster-slurm] $*"; }
die() { echo "[cluster-slurm] error: $*" >&2; exit 1; }

# Run in a node's namespaces with the cluster's Slurm config.
on() { # node cmd...
  local pid
  pid=$(cat "$STATE/nodes/$1/pid") || die "node $1 is not up"
  shift
  nsenter -t "$pid" -m -u -n -i --wd=/ -- env SLURM_CONF="$CONF" "$@"
}

running() { # node program: whether PROGRAM runs in NODE's network namespace (/proc is the machine's)
  local ns p
  ns=$(cat "$STATE/nodes/$1/netns" 2>/dev/null) || return 1
  for p in /proc/[0-9]*; do
    [ "$(cat "$p/comm" 2>/dev/null)" = "$2" ] && [ "$(readlink "$p/ns/net" 2>/dev/null)" = "$ns" ] && return 0
  done
  return 1
}

start_munge() {
  install -d -o munge -g munge -m 0755 "$M"
  if [ ! -s "$M/munge.key" ]; then
    dd if=/dev/urandom of="$M/munge.key" bs=1024 count=1 status=none
    chown munge:munge "$M/munge.key"
    chmod 0400 "$M/munge.key"
  fi
  if ! munge --socket="$M/munge.socket" -n 2>/dev/null | unmunge --socket="$M/munge.socket" >/dev/null 2>&1; then
    runuser -u munge -- /usr/sbin/munged --socket="$M/munge.socket" --key-file="$M/munge.key" \
      --pid-file="$M/munged.pid" --log-file="$M/munged.log" --seed-file="$M/munged.seed"
    sleep 0.3
    munge --socket="$M/munge.socket" -n | unmunge --socket="$M/munge.socket" >/dev/null ||
      die "the cluster's munged does not answer (see $M/munged.log)"
  fi
}

write_conf() {
  local cpus
  cpus=$(nproc)
  mkdir -p "$S/ctld"
  cat >"$CONF.new" <<EOF
# Written by scripts/cluster-slurm.sh: Slurm on the namespace cluster (scripts/cluster-local.sh).
ClusterName=mpirl-ns
SlurmctldHost=head
SlurmUser=root
MailProg=/bin/true
AuthType=auth/munge
CredType=cred/munge
# its own munged; a requeued job becomes eligible after cred_expire + 1 s (default 120 + 1)
AuthInfo=socket=$M/munge.socket,cred_expire=10
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
StateSaveLocation=$S/ctld
# several slurmd on one machine: %n (the node's name) keeps their files apart
SlurmdSpoolDir=$S/spool-%n
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd-%n.pid
SlurmctldLogFile=$S/slurmctld.log
SlurmdLogFile=$S/slurmd-%n.log
# every node declares the machine's CPUs, which the nodes share
SlurmdParameters=config_overrides
# a node silent for 10 s is DOWN (its jobs end NODE_FAIL and are requeued)
SlurmdTimeout=10
JobRequeue=1
ReturnToService=2
NodeName=n[1-$N] CPUs=$cpus RealMemory=1024 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
  if cmp -s "$CONF.new" "$CONF"; then rm -f "$CONF.new"; return 0; fi
  mv "$CONF.new" "$CONF"
  # a running slurmctld keeps the old node list (22.05 reads NodeName lines only at start)
  if running head slurmctld; then
    log "the node count changed: restarting slurmctld"
    kill "$(cat "$S/slurmctld.pid")" 2>/dev/null || true
    local t
    for ((t = 0; t < 50; t++)); do running head slurmctld || break; sleep 0.2; done
  fi
}

node_states() { on head sinfo -h -N -o '%N %T' 2>/dev/null || true; }

up() {
  ((N >= 1)) || die "up needs the node count"
  bash "$here/slurm-local.sh" install
  start_munge
  write_conf
  running head slurmctld || { log "starting slurmctld on head"; on head slurmctld; }
  local i
  for ((i = 1; i <= N; i++)); do
    running "n$i" slurmd || on "n$i" slurmd -N "n$i"
  done
  local t state bad
  for ((t = 0; t < WAIT_S * 2; t++)); do
    state=$(node_states)
    bad=$(awk '$2 !~ /^(idle|mixed|allocated|completing)$/' <<<"$state")
    [ -n "$state" ] && [ "$(wc -l <<<"$state")" -eq "$N" ] && [ -z "$bad" ] && break
    awk '$2 ~ /^(down|drain)/ {print $1}' <<<"$state" | while read -r n; do
      on head scontrol update nodename="$n" state=resume 2>/dev/null || true
    done
    sleep 0.5
  done
  [ -z "${bad:-}" ] && [ -n "$state" ] || { tail -n 20 "$S/slurmctld.log" >&2; die "nodes not idle after ${WAIT_S}s: $state"; }
  log "up: slurmctld on head, slurmd on n1..n$N; SLURM_CONF=$CONF"
  sed 's/^/    /' "$CONF" | grep -v '^    #'
}

down() {
  # The daemons live in the nodes' namespaces, which cluster-local.sh kills; munged is ours.
  local pid
  pid=$(cat "$M/munged.pid" 2>/dev/null) && kill "$pid" 2>/dev/null || true
  return 0
}

status() {
  node_states | sed 's/^/slurm: /'
  [ -n "$(node_states)" ]
}

case $cmd in
  up) up ;;
  down) down ;;
  status) status ;;
  *) die "usage: cluster-slurm.sh up STATE N | down STATE | status STATE" ;;
esac
