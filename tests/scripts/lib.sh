# Shared helpers of the process-level tests. Source it; $1 of the test is the build dir.
set -u
BUILD_DIR=$(cd "$1" && pwd)
SOURCE_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
MPIACCEL="$BUILD_DIR/bin/mpiaccel"
MPIEXEC=${MPIACCEL_MPIEXEC:-mpirun}
default_flags="--oversubscribe --bind-to none"
[ "$(id -u)" = 0 ] && default_flags+=" --allow-run-as-root"
read -r -a MPIEXEC_FLAGS <<< "${MPIACCEL_MPIEXEC_FLAGS:-$default_flags}"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"

mpi() {  # mpi NP PROGRAM ARGS...
  local np=$1; shift
  "$MPIEXEC" "${MPIEXEC_FLAGS[@]}" -np "$np" -x OMP_NUM_THREADS=1 "$@"
}

fail() { echo "FAIL: $*" >&2; exit 1; }
expect_contains() {  # expect_contains FILE TEXT
  grep -qF -- "$2" "$1" || { echo "--- $1:"; cat "$1"; fail "'$2' not found in $1"; }
}

wait_for_lines() {  # wait_for_lines FILE PATTERN N: until FILE has N lines matching PATTERN (60 s at most)
  for _ in $(seq 1 600); do
    [ -f "$1" ] && [ "$(grep -c -- "$2" "$1")" -ge "$3" ] && return 0
    sleep 0.1
  done
  fail "$1 has fewer than $3 lines matching $2 after 60 s"
}

rank_pids() {  # rank_pids MARK COMMAND: pids of the ranks named COMMAND whose command line has MARK
  pgrep -f -- "$1" | while read -r p; do [ "$(ps -o comm= -p "$p")" = "$2" ] && echo "$p"; done
}
