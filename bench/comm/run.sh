#!/usr/bin/env bash
# Runs the comm benchmark at 2 and 4 ranks: run.sh BUILD_DIR [OUT_DIR] [MAX_BYTES]
# Writes OUT_DIR/bench_comm_np{2,4}.csv and prints the tables.
set -euo pipefail
build=${1:?usage: run.sh BUILD_DIR [OUT_DIR] [MAX_BYTES]}
out=${2:-$build/bench}
max_bytes=${3:-268435456}
mkdir -p "$out"
flags=(--oversubscribe --bind-to none)
[ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
for np in 2 4; do
  mpirun "${flags[@]}" -np "$np" -x OMP_NUM_THREADS=1 \
    "$build/bin/bench_comm" "$out/bench_comm_np$np.csv" "$max_bytes"
done
