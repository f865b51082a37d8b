#!/bin/bash
# Checkpoint metadata against world size: 2,000 small sharded tensors saved
# and loaded at np 1, 2, 4, 8 and 16 (oversubscribed), ours
# (bench_ckpt_metadata) beside PyTorch DCP (dcp_metadata.py, torch from the
# project's .venv, gloo), in the same run.   usage: metadata.sh BUILD_DIR OUT_DIR [NPS]
set -eu
build=$1
out=$2
nps=${3:-1 2 4 8 16}
here=$(cd "$(dirname "$0")" && pwd)
python=${MPIACCEL_VENV_PYTHON:-$(cd "$here/../.." && pwd)/.venv/bin/python}
mpiexec=${MPIACCEL_MPIEXEC:-mpirun}
flags=${MPIACCEL_MPIEXEC_FLAGS:---oversubscribe --bind-to none $([ "$(id -u)" = 0 ] && echo --allow-run-as-root)}
mkdir -p "$out"
data=$out/metadata_data
report=$out/bench_ckpt_metadata.txt
: > "$report"
trap 'rm -rf "$data"' EXIT
for np in $nps; do
  rm -rf "$data"
  # shellcheck disable=SC2086
  $mpiexec $flags -np "$np" -x OMP_NUM_THREADS=1 "$build/bin/bench_ckpt_metadata" "$data/ours" | tee -a "$report"
  # shellcheck disable=SC2086
  $mpiexec $flags -np "$np" -x OMP_NUM_THREADS=1 -x MASTER_ADDR=127.0.0.1 \
    -x MASTER_PORT=$((20000 + RANDOM % 20000)) "$python" "$here/dcp_metadata.py" "$data/dcp" | tee -a "$report"
done
echo "report: $report"
