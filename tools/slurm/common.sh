# shellcheck shell=bash
# shellcheck disable=SC2034  # the variables are used by the scripts that source this file
# Shared by tools/slurm/{up,down,selftest}. Sourced, never run.
#
# Every knob is a JOBDISPATCH_SLURM_* variable: Slurm's own clients read SLURM_* and SBATCH_*
# variables from the environment, so a knob spelled SLURM_NODES would leak into every sbatch call.

SLURM_STATE_DIR=${JOBDISPATCH_SLURM_STATE:-/var/lib/jobdispatch-slurm}
SLURM_NODE_COUNT=${JOBDISPATCH_SLURM_NODES:-2}
SLURM_NODE_CPUS=${JOBDISPATCH_SLURM_NODE_CPUS:-2}
SLURM_NODE_MEM=${JOBDISPATCH_SLURM_NODE_MEM:-2048}
SLURM_NODE_GPUS=${JOBDISPATCH_SLURM_NODE_GPUS:-2}
SLURM_GPU_TYPE=${JOBDISPATCH_SLURM_GPU_TYPE:-tesla}
SLURM_CLUSTER_NAME=${JOBDISPATCH_SLURM_CLUSTER:-dispatch}
SLURM_CRED_EXPIRE=${JOBDISPATCH_SLURM_CRED_EXPIRE:-10}
SLURM_DB_PORT=${JOBDISPATCH_SLURM_DB_PORT:-3306}
SLURM_NODE_PORT_BASE=${JOBDISPATCH_SLURM_NODE_PORT_BASE:-17000}
# Slurm's clients and daemons look for /etc/slurm/slurm.conf; keeping it there means a plain
# `sbatch`, also over ssh, reaches this cluster without SLURM_CONF.
SLURM_CONF_DIR=/etc/slurm

RUN_DIR=$SLURM_STATE_DIR/run
LOG_DIR=$SLURM_STATE_DIR/log
DB_DIR=$SLURM_STATE_DIR/mysql
DB_SOCKET=$RUN_DIR/mysql/mysqld.sock
DB_PIDFILE=$RUN_DIR/mysql/mariadbd.pid

_tag=${0##*/}
say() { printf '[slurm-%s %s] %s\n' "$_tag" "$(date +%T)" "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

# pid_alive FILE: the PID written in FILE is a live process.
pid_alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# poll SECONDS CMD...: run CMD every 0.2 s until it succeeds; non-zero if it never does.
poll() {
  local deadline=$(( $(date +%s) + $1 )); shift
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -ge "$deadline" ] && return 1
    sleep 0.2
  done
}

# poll_daemon PIDFILE SECONDS CMD...: like poll, but give up at once when the daemon whose PID is
# in PIDFILE has died (a daemon that fails to bind its port exits within a second).
poll_daemon() {
  local f=$1 deadline=$(( $(date +%s) + $2 )); shift 2
  until "$@" >/dev/null 2>&1; do
    if [ -s "$f" ] && ! kill -0 "$(cat "$f")" 2>/dev/null; then say "the process in $f has exited"; return 1; fi
    [ "$(date +%s)" -ge "$deadline" ] && return 1
    sleep 0.2
  done
}

# show_log FILE: the tail of a daemon's log, for a failure message.
show_log() { { echo "---- last lines of $1 ----"; tail -n 30 "$1" 2>/dev/null || echo "(no log)"; echo "----"; } >&2; }

# stop_pid FILE NAME: TERM the process in FILE, wait up to 10 s, then KILL. Never by name.
stop_pid() {
  local f=$1 name=$2 pid
  [ -s "$f" ] || { rm -f "$f"; return 0; }
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    say "stopping $name (pid $pid)"
    kill -TERM "$pid" 2>/dev/null
    local i
    for i in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then say "$name did not exit after TERM, sending KILL"; kill -KILL "$pid" 2>/dev/null; fi
  fi
  rm -f "$f"
}

db() { mariadb --no-defaults --socket="$DB_SOCKET" -uroot "$@"; }

elapsed_since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
