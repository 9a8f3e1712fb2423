#!/usr/bin/env bash
# A real one-node Slurm on this machine (Debian 12, run as root, no systemd needed), so that the
# CTest label `slurm` can submit slurm/train.sbatch and exercise requeue/signals for real.
#   scripts/slurm-local.sh [start]   install munge + Slurm if missing, write /etc/slurm/slurm.conf,
#                                    start munged, slurmctld, slurmd; wait until the node is idle
#   scripts/slurm-local.sh stop      stop slurmd, slurmctld and munged
#   scripts/slurm-local.sh status    show the daemons and sinfo; exit 1 unless the node is usable
#   scripts/slurm-local.sh install   only install munge + Slurm (for scripts/cluster-local.sh --slurm)
# Idempotent: running daemons are left alone unless slurm.conf changed (then Slurm is restarted).
# Notes: one partition `debug` with OverSubscribe=FORCE:4, so several jobs can share the 2 cores;
# AuthInfo=cred_expire=10 makes a requeued job eligible again after 11 s instead of 121 s
# (Slurm sets a requeued job's BeginTime to now + cred_expire + 1; `scontrol update jobid=J
# StartTime=now` once it is PENDING skips even that). --signal=B:SIG@N and time limits are checked
# every 30 s, so SIG may come up to ~60 s early and the kill up to 30 s late. No accounting (no
# slurmdbd), so sacct does not work: use `scontrol show job` (for MinJobAge=300 s) or
# /var/log/slurm/jobcomp.log.
set -euo pipefail

HOST=$(hostname -s)
CONF=/etc/slurm/slurm.conf
RUN=/run/slurm
LOGS=/var/log/slurm
WAIT_S=${SLURM_LOCAL_WAIT_S:-30}

log() { echo "[slurm-local] $*"; }
die() { echo "[slurm-local] error: $*" >&2; exit 1; }

pid_alive() { # pidfile name: the pid in pidfile is alive and is the named program
  local pid
  pid=$(cat "$1" 2>/dev/null) || return 1
  [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ]
}

stop_pid() { # pidfile name: TERM, then KILL after 10 s
  pid_alive "$1" "$2" || { rm -f "$1"; return 0; }
  local pid i
  pid=$(cat "$1")
  log "stopping $2 (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do pid_alive "$1" "$2" || break; sleep 0.2; done
  if pid_alive "$1" "$2"; then kill -KILL "$pid" 2>/dev/null || true; fi
  rm -f "$1"
}

install_packages() {
  local p missing=()
  for p in slurmctld slurmd slurm-client munge; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  local aptlog=/tmp/slurm-local-apt.log
  apt_install() { apt-get install -y -qq --no-install-recommends "${missing[@]}" >>"$aptlog" 2>&1; }
  : >"$aptlog"
  # apt-get update only when the package lists lack slurmd or the first install fails
  if ! apt-cache policy slurmd 2>/dev/null | grep -q 'Candidate: [0-9]' || ! apt_install; then
    if ! { apt-get update -qq && apt_install; } >>"$aptlog" 2>&1; then
      tail -n 20 "$aptlog" >&2
      die "apt-get failed (log: $aptlog)"
    fi
  fi
}

start_munge() {
  if [ ! -s /etc/munge/munge.key ]; then
    log "creating /etc/munge/munge.key"
    install -d -o munge -g munge -m 0700 /etc/munge
    mungekey --create --keyfile=/etc/munge/munge.key 2>/dev/null ||
      dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
  fi
  chown munge:munge /etc/munge/munge.key
  chmod 0400 /etc/munge/munge.key
  install -d -o munge -g munge -m 0755 /run/munge
  install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge
  if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    stop_pid /run/munge/munged.pid munged
    log "starting munged"
    runuser -u munge -- /usr/sbin/munged
    sleep 0.5
    munge -n | unmunge >/dev/null || die "munge -n | unmunge fails (see /var/log/munge/munged.log)"
  fi
}

write_conf() { # prints "changed" when slurm.conf was (re)written
  local node mem new
  node=$(slurmd -C | head -n1)
  [[ $node == NodeName=* ]] || die "unexpected 'slurmd -C' output: $node"
  mem=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$node")
  # 90% of the memory, rounded down to 256 MiB, so the node is not drained for low memory
  node=${node/RealMemory=$mem/RealMemory=$((mem * 9 / 10 / 256 * 256))}
  new=$(cat <<EOF
# Written by scripts/slurm-local.sh: a one-node local cluster; edits are overwritten.
ClusterName=mpirl-local
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
MailProg=/bin/true
AuthType=auth/munge
CredType=cred/munge
# A requeued job becomes eligible after cred_expire + 1 s (default 120 + 1)
AuthInfo=cred_expire=10
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$LOGS/jobcomp.log
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=5,bf_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd.log
JobRequeue=1
ReturnToService=2
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
)
  mkdir -p /etc/slurm
  if [ "$new" != "$(cat "$CONF" 2>/dev/null)" ]; then
    printf '%s\n' "$new" >"$CONF"
    echo changed
  fi
}

node_state() { sinfo -h -n "$HOST" -o %T 2>/dev/null | head -n1; }

wait_idle() {
  local i state=""
  for ((i = 0; i < WAIT_S * 2; i++)); do
    state=$(node_state || true)
    case $state in
      idle | mixed | allocated | completing) return 0 ;;
      down* | drain* | *drained*) scontrol update nodename="$HOST" state=resume 2>/dev/null || true ;;
    esac
    sleep 0.5
  done
  echo "--- slurmctld.log" >&2; tail -n 20 "$LOGS/slurmctld.log" >&2 || true
  echo "--- slurmd.log" >&2; tail -n 20 "$LOGS/slurmd.log" >&2 || true
  die "node $HOST not usable after ${WAIT_S}s (state: '${state:-no answer}')"
}

stop_slurm() {
  stop_pid "$RUN/slurmd.pid" slurmd
  stop_pid "$RUN/slurmctld.pid" slurmctld
}

start() {
  install_packages
  start_munge
  mkdir -p "$RUN" "$LOGS" /var/spool/slurmctld /var/spool/slurmd
  if [ "$(write_conf)" = changed ]; then
    log "wrote $CONF"
    stop_slurm
  fi
  if ! pid_alive "$RUN/slurmctld.pid" slurmctld; then log "starting slurmctld"; slurmctld; fi
  if ! pid_alive "$RUN/slurmd.pid" slurmd; then log "starting slurmd"; slurmd; fi
  wait_idle
  echo "slurm-local: up (node $HOST, $(sinfo -h -n "$HOST" -o %c) cpus, partition debug, state $(node_state))"
}

status() {
  local d ok=0
  for d in slurmctld slurmd; do
    if pid_alive "$RUN/$d.pid" "$d"; then echo "$d: running (pid $(cat "$RUN/$d.pid"))"; else echo "$d: stopped"; ok=1; fi
  done
  if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then echo "munged: running"; else echo "munged: stopped"; ok=1; fi
  ((ok == 0)) && sinfo && case $(node_state) in idle | mixed | allocated | completing) return 0 ;; esac
  return 1
}

case ${1:-start} in
  start) start ;;
  install) install_packages ;;  # the packages only (scripts/cluster-slurm.sh runs its own daemons)
  stop)
    stop_slurm
    stop_pid /run/munge/munged.pid munged
    echo "slurm-local: stopped"
    ;;
  status) status ;;
  *) die "usage: $0 [start|stop|status|install]" ;;
esac
