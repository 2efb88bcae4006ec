#!/usr/bin/env bash
# Install and start a real single-node SLURM cluster on this machine (root, no systemd), for the slurm-profile test.
# Writes the daemons' PIDs to $SLURM_PIDFILE (default /tmp/plmclaims-slurm.pids); .ci/slurm-down.sh stops them by PID.
set -euo pipefail
pidfile=${SLURM_PIDFILE:-/tmp/plmclaims-slurm.pids}
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null
fi
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge /var/lib/munge /var/log/munge
[ -s /etc/munge/munge.key ] || mungekey --create --keyfile /etc/munge/munge.key
chown -R root:root /etc/munge /run/munge /var/lib/munge /var/log/munge  # munged runs as root here
chmod 0700 /etc/munge && chmod 0400 /etc/munge/munge.key
cpus=$(nproc)
mem_mb=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 2048 ))
# The job-step plugin strips SLURM_CONF before srun, so the config must be at the default path.
cat > /etc/slurm/slurm.conf <<CONF
ClusterName=plmclaims-ci
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
MinJobAge=3600
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=localhost NodeAddr=127.0.0.1 CPUs=${cpus} RealMemory=${mem_mb} State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
: > "$pidfile"
alive() {  # a live (not zombie) process named $1
  for pid in $(pgrep -x "$1"); do
    case "$(ps -o stat= -p "$pid" 2>/dev/null)" in Z*|"") ;; *) return 0 ;; esac
  done
  return 1
}
# start each daemon unless one is alive; record only those started here, from their own pid files
start() {  # name pidfile command...
  local name=$1 pf=$2
  shift 2
  alive "$name" && return 0
  rm -f "$pf"
  "$@"
  for _ in $(seq 1 50); do [ -s "$pf" ] && break; sleep 0.2; done
  cat "$pf" >> "$pidfile"
}
start munged /run/munge/munged.pid munged --force
start slurmctld /run/slurmctld.pid slurmctld -i
start slurmd /run/slurmd.pid slurmd
for _ in $(seq 1 30); do
  if sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then break; fi
  sleep 1
done
sinfo
