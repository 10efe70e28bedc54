# shellcheck shell=bash
# What tests/clients/build.sh and build_helm.sh share: a binary built from Go modules once, cached by
# version, or taken from an override variable. Sourced, never run; each function that ends the build
# exits the calling script, with the code and message the script documents.
#
# The caller sets, before calling these:
#   CACHE  the cache root ($CRDOPS_CACHE or ~/.cache/crdops)
#   OUT    the folder the binary lands in, under $CACHE/bin
#   BIN    the binary, in $OUT
# The messages name each client as the caller words it, so they are passed in whole or in part.

# --print-path prints where the binary is (the override when set) and exits; any other argument is refused.
cached_build_arguments() {  # cached_build_arguments <override variable> "$@"
  local var="$1"; shift
  if [[ "${1:-}" == "--print-path" ]]; then echo "${!var:-$BIN}"; exit 0; fi
  [[ $# -eq 0 ]] || { echo "unknown argument: $1" >&2; exit 2; }
}

# A binary named by the override variable is used as it is: nothing is built.
use_override() {  # use_override <override variable> <name>
  local var="$1" name="$2"
  [[ -n "${!var:-}" ]] || return 0
  [[ -x "${!var}" ]] || { echo "$var=${!var} is not an executable" >&2; exit 1; }
  echo "$name: using $var=${!var}"
  exit 0
}

exit_if_cached() {  # exit_if_cached <message>
  if [[ -x "$BIN" ]]; then echo "$1"; exit 0; fi
}

# One build at a time per cache (two checkouts, or CI beside a session): the second waits, then finds the
# binary (exit_if_cached again) and does nothing. The lock is held on fd 9 until the script ends.
wait_for_build_lock() {  # wait_for_build_lock <name>
  local lock="$CACHE/$1-build.lock"
  mkdir -p "$OUT" "$CACHE/logs"
  exec 9>"$lock"
  if ! flock -n 9; then
    echo "another $1 build is running (lock $lock); waiting for it"
    flock 9
  fi
}

require_go() {  # require_go <what is built> <override hint>
  if ! command -v go >/dev/null 2>&1; then
    echo "Go is not installed, so $1 cannot be built; set $2" >&2
    exit 1
  fi
}

# The command with /usr/bin/time -v where there is one, so the log records the build's time and memory.
timed() {  # timed <command...>
  if [[ -x /usr/bin/time ]]; then /usr/bin/time -v "$@"; else "$@"; fi
}

# The build runs in a subshell with all its output in the log; only a failure shows the log's last lines,
# followed by the way around building.
run_build() {  # run_build <log> <what is built> <alternative> <command...>
  local log="$1" what="$2" alternative="$3" rc=0; shift 3
  # not `( ... ) || handle`: bash ignores `set -e` inside a subshell on the left of `||`, so a failed step in the
  # build would go on to the next one and the build would look done without a binary
  set +e
  (
    set -e
    "$@"
  ) >"$log" 2>&1
  rc=$?
  set -e
  if [[ $rc -ne 0 ]]; then
    echo "building $what failed; the last lines of $log:" >&2
    tail -n 30 "$log" >&2 || true
    echo "Alternative: $alternative" >&2
    exit 1
  fi
}
