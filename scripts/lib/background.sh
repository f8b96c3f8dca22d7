# Preparation steps run in the background while something else uses the CPU (.ci/run: the
# downloads of the later legs beside the Debian 12 build). Sourced after setup.sh, not run.
#   sparsevit_background NAME LOGDIR "what it makes" COMMAND...   starts COMMAND, output to LOGDIR/NAME.log
#   sparsevit_background_wait NAME LOGDIR                         waits for it; on failure prints its
#                                                                 own error with the log's tail, exits 1

sparsevit_background() {
  local name="${1:?}" logs="${2:?}" what="${3:?}"
  shift 3
  printf '%s\n' "$what" > "$logs/$name.what"
  sparsevit_log "Preparing $what in the background (log: $logs/$name.log)"
  # nice: the foreground build keeps the CPU; the downloads mostly wait on the network anyway.
  ( s=$SECONDS; rc=0; nice -n 5 "$@" > "$logs/$name.log" 2>&1 < /dev/null || rc=$?
    echo "$(( SECONDS - s ))" > "$logs/$name.seconds"; exit "$rc" ) &
  echo $! > "$logs/$name.pid"
}

sparsevit_background_wait() {
  local name="${1:?}" logs="${2:?}" pid rc=0 what
  pid="$(cat "$logs/$name.pid")"
  what="$(cat "$logs/$name.what")"
  wait "$pid" || rc=$?
  if [ "$rc" -ne 0 ]; then
    tail -n 20 "$logs/$name.log" >&2
    echo "error: preparing $what failed (exit $rc; log: $logs/$name.log)" >&2
    exit 1
  fi
  sparsevit_log "Prepared $what in the background in $(cat "$logs/$name.seconds") s"
}
