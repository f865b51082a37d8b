#!/usr/bin/env bash
# Context parallelism against one rank: causal attention of one sequence of
# 4096 positions (8 heads of width 64, float32), forward and backward, and a
# step of the bundled GPT at seq_len 4096 (2 layers, width 128, 8 heads,
# byte vocabulary, batch 1), at cp 1 (the whole sequence on one rank,
# LibTorch's fused attention kernel), 2 and 4 (each rank its zigzag shard;
# attention by ring and by all-to-all). One torch thread per rank; on a
# 2-core machine cp 4 oversubscribes the cores. Measured per rank: time
# (the slowest rank's median) and the peak memory allocated during forward
# and backward (bench_cp.cpp says what is counted); the table gives each
# beside cp 1's (memory goal ≈ 1/cp).
#
#   run.sh BUILD_DIR [OUT_DIR]          (OUT_DIR defaults to BUILD_DIR/bench)
# Environment: CP_SIZES ("1 2 4"), CP_SEQ (4096), CP_WARMUP (1), CP_ITERS (3).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${1:?usage: run.sh BUILD_DIR [OUT_DIR]}
out=${2:-$build/bench}
read -r -a sizes <<<"${CP_SIZES:-1 2 4}"
ours=$build/bin/bench_cp
[ -x "$ours" ] || { echo "bench/cp: $ours not found: build it with cmake --build $build --target bench_cp" >&2; exit 1; }
mkdir -p "$out"
raw=$out/cp_raw.csv
rm -f "$raw"
flags=(--oversubscribe --bind-to none -x OMP_NUM_THREADS=1)
[ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
for cp in "${sizes[@]}"; do
  mpirun "${flags[@]}" -np "$cp" "$ours" --csv "$raw" --seq "${CP_SEQ:-4096}" --warmup "${CP_WARMUP:-1}" \
    --iters "${CP_ITERS:-3}" model.n_layer=2 model.n_embd=128 model.n_head=8
done
/usr/bin/python3 "$here/summarize.py" "$raw" "$out/cp.csv"
