#!/bin/bash
# Checkpoint benchmark: np 1, 2, 4 save/load of ~1 GiB against a sequential
# write+fsync and torch::save per rank on the same disk, then loads with
# resharding (saved on 4, loaded on 2 and 3). Prints the rows and writes
# OUT/bench_ckpt.csv; then read_once.sh, metadata.sh and async.sh (loads that
# read each byte once; metadata against np beside DCP; asynchronous saves
# beside DCP).   usage: run.sh BUILD_DIR [OUT_DIR (BUILD_DIR/bench)] [MIB]
set -eu
build=$1
out=${2:-$build/bench}
mib=${3:-1024}
bin=$build/bin/bench_ckpt
mpiexec=${MPIACCEL_MPIEXEC:-mpirun}
flags=${MPIACCEL_MPIEXEC_FLAGS:---oversubscribe --bind-to none $([ "$(id -u)" = 0 ] && echo --allow-run-as-root)}
mkdir -p "$out"
data=$out/ckpt_data
csv=$out/bench_ckpt.csv
rm -rf "$data"
echo "np,method,op,writers,bytes,seconds,GB_per_s,median_seconds,median_GB_per_s" > "$csv"
trap 'rm -rf "$data"' EXIT
for np in 1 2 4; do
  # shellcheck disable=SC2086
  $mpiexec $flags -np "$np" -x OMP_NUM_THREADS=1 "$bin" "$data" --mib "$mib" --csv "$csv"
done
saved_by_4=$(ls "$data"/ours_np4/step_*.h5 | tail -1)
for np in 2 3; do
  # shellcheck disable=SC2086
  $mpiexec $flags -np "$np" -x OMP_NUM_THREADS=1 "$bin" "$data" --mib "$mib" --csv "$csv" --load-only "$saved_by_4"
done
echo "CSV: $csv"
here=$(cd "$(dirname "$0")" && pwd)
bash "$here/read_once.sh" "$build" "$out"
bash "$here/metadata.sh" "$build" "$out"
bash "$here/async.sh" "$build" "$out"
