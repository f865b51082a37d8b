# ctest: timeout 60
# A rank that never joins a collective ends the job (non-zero exit, well within
# the test's time) with a message naming the op, its bytes and the rank: the
# communicator's deadline, whether or not the caller waits on the op, and
# also when the op is the shared-memory all-reduce.
source "$(dirname "$0")/lib.sh" "$1"
helper=$BUILD_DIR/tests/comm_deadline_helper
[ -x "$helper" ] || fail "$helper is missing; build the target comm_deadline_helper"
work=$WORK
for mode in wait nowait shared; do
  start=$(date +%s)
  mpi 2 "$helper" 3000 "$mode" > "$work/out" 2> "$work/err"
  rc=$?
  elapsed=$(( $(date +%s) - start ))
  if [ "$mode" = shared ] && grep -qF "allocate_shared gave no shared memory" "$work/err"; then
    echo "[shared] skipped: this host's /dev/shm cannot hold the segments (the MPI fallback applies)"
    continue
  fi
  want="all_reduce of 4194304 bytes (float32) on rank 0 of 2 did not complete within 3 s"
  [ "$rc" -ne 0 ] || check_failed "[$mode]: the job exited 0; the deadline did not abort it"
  [ "$elapsed" -lt 30 ] || check_failed "[$mode]: took ${elapsed} s for a 3 s deadline"
  grep -qF "$want" "$work/err" || check_failed "[$mode]: stderr does not say: $want"
  echo "[$mode] exit $rc after ${elapsed} s; stderr:"
  sed 's/^/    /' "$work/err" | head -20
done
finish
