#!/usr/bin/env bash
# Stop the daemons .ci/slurm-up.sh started, by PID.
pidfile=${SLURM_PIDFILE:-/tmp/plmclaims-slurm.pids}
[ -f "$pidfile" ] || exit 0
while read -r pid; do
  [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
done < "$pidfile"
rm -f "$pidfile"
