# ctest: timeout 180
# The DDP tests again with the shared-memory all-reduce turned off
# (MPIACCEL_SHM_ALLREDUCE=0): on one node the buckets normally live in
# node-shared memory, so this is what keeps the MPI path of the reducer
# (the multi-node path) tested here. 3 ranks: uneven slices and buckets.
source "$(dirname "$0")/lib.sh" "$1"
for test in mpi_test_ddp mpi_test_ddp_buckets mpi_test_zero; do
  program=$BUILD_DIR/tests/$test
  [ -x "$program" ] || fail "$program is missing; build the target $test"
  mpi 3 -x MPIACCEL_SHM_ALLREDUCE=0 "$program" > "$WORK/$test.out" 2>&1 \
    || { tail -40 "$WORK/$test.out"; fail "$test at 3 ranks over MPI messages"; }
  echo "$test: passed at 3 ranks with MPIACCEL_SHM_ALLREDUCE=0"
done
