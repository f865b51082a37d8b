# ctest: timeout 60
# A rank that never joins a collective ends the job (non-zero exit, well within
# the test's time) with a message naming the op, its bytes and the rank: the
# communicator's deadline, whether or not the caller waits on the op, and
# also when the op is the shared-memory all-reduce.
set -u
build=$1
helper=$build/tests/comm_deadline_helper
if [ ! -x "$helper" ]; then
  echo "FAIL: $helper is missing; build the target comm_deadline_helper" >&2
  exit 1
fi
mpiexec=${MPIACCEL_MPIEXEC:-mpirun}
flags=${MPIACCEL_MPIEXEC_FLAGS:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
for mode in wait nowait shared; do
  start=$(date +%s)
  # shellcheck disable=SC2086  # flags is a list of words
  $mpiexec $flags -np 2 -x OMP_NUM_THREADS=1 "$helper" 3000 "$mode" \
    > "$work/out" 2> "$work/err"
  rc=$?
  elapsed=$(( $(date +%s) - start ))
  if [ "$mode" = shared ] && grep -qF "allocate_shared gave no shared memory" "$work/err"; then
    echo "[shared] skipped: this host's /dev/shm cannot hold the segments (the MPI fallback applies)"
    continue
  fi
  want="all_reduce of 4194304 bytes (float32) on rank 0 of 2 did not complete within 3 s"
  if [ "$rc" -eq 0 ]; then
    echo "FAIL [$mode]: the job exited 0; the deadline did not abort it" >&2; status=1
  fi
  if [ "$elapsed" -ge 30 ]; then
    echo "FAIL [$mode]: took ${elapsed} s for a 3 s deadline" >&2; status=1
  fi
  if ! grep -qF "$want" "$work/err"; then
    echo "FAIL [$mode]: stderr does not say: $want" >&2; status=1
  fi
  echo "[$mode] exit $rc after ${elapsed} s; stderr:"
  sed 's/^/    /' "$work/err" | head -20
done
exit $status
