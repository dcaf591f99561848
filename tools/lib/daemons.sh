# shellcheck shell=bash
# The helpers every test-service script shares (tools/{kube,slurm,s3}/common.sh source this):
# messages, waiting for a daemon to answer, and stopping one by its PID file. Sourced, never run.
#
# The sourcing file sets, before sourcing:
#   SERVICE        the message prefix (kube, slurm, s3): lines read [SERVICE-SCRIPT HH:MM:SS] ...
#   POLL_SECONDS   how often poll and poll_daemon try again (default 0.2)
#   LOG_LINES      how much of a log show_log prints (default 30)
#   STOP_SECONDS   how long stop_pid waits after TERM before it sends KILL (default 10)

_tag=${0##*/}
say() { printf '[%s-%s %s] %s\n' "$SERVICE" "$_tag" "$(date +%T)" "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

# pid_alive FILE: the PID written in FILE is a live process, and the same one that was written.
# A PID file outlives its process when a machine reboots or is restored from an image, and by then
# its PID may belong to a stranger (on a busy machine, likely one this very script started). A
# process is the file's only if it started no later than the file was written; one second of
# slack covers the whole-second clocks on both sides.
#
# That comparison goes through the wall clock (the boot time /proc/stat reports is the time now
# minus the uptime), and when the wall clock is stepped forward (a machine paused and restored
# from a snapshot, then set right) every daemon started before the step seems to have started
# after its file was written, and is disowned: the likeliest reading of a CI run that found its
# S3 port taken by a monitor that `up` and `down` no longer knew of. So a process once found to
# be the file's is remembered beside it, in FILE.started: its PID, its start in clock ticks since
# boot (which no clock step moves) and the kernel's boot id. A process matching all three is the
# file's; anything else is judged by the times as above.
pid_alive() {
  [ -s "$1" ] || return 1
  local pid ticks boot started written known
  pid=$(cat "$1")
  kill -0 "$pid" 2>/dev/null || return 1
  ticks=$(start_ticks "$pid") || return 0  # no /proc to ask: kill -0 is all there is
  boot=$(cat /proc/sys/kernel/random/boot_id 2>/dev/null) || boot=unknown
  if [ -s "$1.started" ] && read -r known <"$1.started" && [ "$known" = "$pid $ticks $boot" ]; then
    return 0
  fi
  started=$(ticks_to_epoch "$ticks") || return 0
  written=$(stat -c %Y "$1")
  [ "$started" -le $(( written + 1 )) ] || return 1
  { echo "$pid $ticks $boot" >"$1.started"; } 2>/dev/null || true  # a memo: unwritable costs nothing
}

# start_ticks PID: when the process started, in clock ticks since boot (from /proc).
start_ticks() {
  local ticks
  [ -r "/proc/$1/stat" ] || return 1
  # Field 22 is the start time; the command name (field 2) may hold spaces, so count from after
  # its closing parenthesis, where field 3 begins.
  ticks=$(sed 's/^.*) //' "/proc/$1/stat" | cut -d' ' -f20) || return 1
  [ -n "$ticks" ] || return 1
  echo "$ticks"
}

# ticks_to_epoch TICKS: a start in clock ticks since boot, in whole seconds since the epoch.
ticks_to_epoch() {
  local btime hz
  btime=$(awk '$1 == "btime" { print $2 }' /proc/stat)
  hz=$(getconf CLK_TCK)
  [ -n "$btime" ] && [ -n "$hz" ] || return 1
  echo $(( btime + $1 / hz ))
}

# poll SECONDS CMD...: run CMD every POLL_SECONDS until it succeeds; non-zero if it never does.
poll() {
  local deadline=$(( $(date +%s) + $1 )); shift
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -ge "$deadline" ] && return 1
    sleep "${POLL_SECONDS:-0.2}"
  done
}

# poll_daemon PIDFILE SECONDS CMD...: like poll, but give up at once when the process whose PID
# is in PIDFILE has exited (a daemon with a bad flag or a taken port exits within a second).
poll_daemon() {
  local f=$1 deadline=$(( $(date +%s) + $2 )); shift 2
  until "$@" >/dev/null 2>&1; do
    if [ -s "$f" ] && ! pid_alive "$f"; then say "the process in $f has exited"; return 1; fi
    [ "$(date +%s)" -ge "$deadline" ] && return 1
    sleep "${POLL_SECONDS:-0.2}"
  done
}

# show_log FILE: the tail of a daemon's log, for a failure message.
show_log() { { echo "---- last lines of $1 ----"; tail -n "${LOG_LINES:-30}" "$1" 2>/dev/null || echo "(no log)"; echo "----"; } >&2; }

# stop_pid FILE [NAME]: TERM the process in FILE, wait up to STOP_SECONDS, then KILL. Never by
# name. NAME is what the messages call it (the file's name by default).
stop_pid() {
  local f=$1 name=${2:-${1##*/}} pid i
  [ -s "$f" ] || { rm -f "$f" "$f.started"; return 0; }
  pid=$(cat "$f")
  if pid_alive "$f"; then
    say "stopping $name (pid $pid)"
    kill -TERM "$pid" 2>/dev/null
    for i in $(seq 1 $(( ${STOP_SECONDS:-10} * 10 ))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then say "$name did not exit after TERM, sending KILL"; kill -KILL "$pid" 2>/dev/null; fi
  fi
  rm -f "$f" "$f.started"
}

elapsed_since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
