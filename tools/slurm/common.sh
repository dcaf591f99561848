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

SERVICE=slurm POLL_SECONDS=0.2 LOG_LINES=30 STOP_SECONDS=10
# shellcheck source=../lib/daemons.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/daemons.sh"

db() { mariadb --no-defaults --socket="$DB_SOCKET" -uroot "$@"; }
