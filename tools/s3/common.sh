# shellcheck shell=bash disable=SC2034  # the variables are used by the scripts that source this
# Shared by tools/s3/{up,down}. Sourced, never run.
#
# The S3 server for tests is Ceph's radosgw from Debian, in front of a throw-away cluster of one
# monitor and one OSD whose objects live in memory (memstore). It is a real S3 implementation: it
# checks SigV4 signatures and honours If-None-Match, which is what the checkpoint tests rest on.
#
# Every knob is a JOBDISPATCH_S3_* variable, so that nothing here is mistaken for the AWS_* or
# CEPH_* variables the clients themselves read.

S3_STATE_DIR=${JOBDISPATCH_S3_STATE:-/var/lib/jobdispatch-s3}
S3_PORT=${JOBDISPATCH_S3_PORT:-7480}
S3_MON_PORT=${JOBDISPATCH_S3_MON_PORT:-16789}
# Objects live in RAM (allocated as written): the benchmark writes and deletes 1 GiB files, and
# deleted data waits for radosgw's garbage collector, so leave room for several.
S3_MEMSTORE_BYTES=${JOBDISPATCH_S3_MEMSTORE_BYTES:-8589934592}
S3_ACCESS_KEY=${JOBDISPATCH_S3_ACCESS_KEY:-JOBDISPATCHTEST}
S3_SECRET_KEY=${JOBDISPATCH_S3_SECRET_KEY:-jobdispatch-test-secret}
S3_REGION=${JOBDISPATCH_S3_REGION:-us-east-1}

CEPH_DIR=$S3_STATE_DIR/ceph
RUN_DIR=$CEPH_DIR/run
LOG_DIR=$CEPH_DIR/log
ENV_FILE=$S3_STATE_DIR/env
export CEPH_CONF=$CEPH_DIR/ceph.conf

# The daemons, in the order they are started (and the reverse of the order they are stopped).
# Each writes its own PID file into $RUN_DIR (ceph.conf's `pid file`).
DAEMON_PIDS=("$RUN_DIR/mon.a.pid" "$RUN_DIR/osd.0.pid" "$RUN_DIR/client.rgw.a.pid")

SERVICE=s3 POLL_SECONDS=0.2 LOG_LINES=30 STOP_SECONDS=10
# shellcheck source=../lib/daemons.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/daemons.sh"
# A command that fails under `set -e` ends the script; say which one, so that a failed start is
# never silent (stdout is eval'ed by the caller and carries nothing then).
set -E
trap 'say "ERROR: line $LINENO: \`$BASH_COMMAND\` failed (exit $?)"' ERR

# ceph_admin ARGS...: a `ceph ARGS...` cluster command, retried for up to 30 s: a monitor that
# has just started answers `ceph -s` before it takes every command. Its output on success; on
# failure the last error, and non-zero.
ceph_admin() {
  local out deadline=$(( $(date +%s) + 30 ))
  until out=$(ceph "$@" 2>&1); do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      say "ceph $*: $out"
      return 1
    fi
    sleep 0.5
  done
  printf '%s\n' "$out"
}

# answers: the S3 endpoint replies to an HTTP request (any status counts: 403 is an answer).
answers() { curl -s -o /dev/null -m 2 "http://127.0.0.1:$S3_PORT/"; }

