#!/usr/bin/env bash
# The single-process step against PyTorch eager at its best: ours (bench_fsdp
# with strategy no, one rank) and PyTorch eager (torch_eager.py, the .venv's
# torch: the same LibTorch as ours) with its AdamW in both forms, default and
# fused=True, on the bundled GPT (8 layers, n_embd 704: 48M parameters, vocab
# 256, seq_len 64, batch 2, AdamW, grad_clip 1.0), one torch thread each, in
# fp32 and in bf16 autocast. A step is forward + loss, backward, and the
# optimizer phase (clip, step, zero_grad), each timed.
#
#   run.sh BUILD_DIR [OUT_DIR]          (OUT_DIR defaults to BUILD_DIR/bench)
#
# Each round runs the three, one process each, in the opposite order to the
# round before, so slow drift of a shared machine hits every side alike; a
# figure is the median over rounds of each run's median step. Writes
# OUT_DIR/eager_raw.csv (a row per run) and OUT_DIR/eager.csv (the summary),
# prints the table.
#
# Environment: EAGER_ROUNDS (3), EAGER_WARMUP (2), EAGER_ITERS (8),
# EAGER_BF16_ITERS (3: a bf16 step takes about 10 s on a CPU without native
# bf16 arithmetic, one warmup step before them), EAGER_PRECISIONS ("fp32 bf16"), EAGER_MODEL_ARGS (e.g. "--n-layer 2
# --n-embd 128 --n-head 4" for a quick check), MPIACCEL_VENV_PYTHON (the
# peer's python, .venv/bin/python).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${1:?usage: run.sh BUILD_DIR [OUT_DIR]}
out=${2:-$build/bench}
rounds=${EAGER_ROUNDS:-3}
warmup=${EAGER_WARMUP:-2}
iters=${EAGER_ITERS:-8}
bf16_iters=${EAGER_BF16_ITERS:-3}
precisions=${EAGER_PRECISIONS:-fp32 bf16}
read -r -a model_args <<<"${EAGER_MODEL_ARGS:-}"
ours=$build/bin/bench_fsdp
python=${MPIACCEL_VENV_PYTHON:-$(cd "$here/../.." && pwd)/.venv/bin/python}

[ -x "$ours" ] || { echo "bench/eager: $ours not found: build it with cmake --build $build --target bench_fsdp" >&2; exit 1; }
"$python" -c 'import torch' 2>/dev/null ||
  { echo "bench/eager: $python cannot import torch: run make deps (the .venv's torch wheel)" >&2; exit 1; }

mkdir -p "$out"
ours_raw=$out/eager_ours_raw.csv
peer_raw=$out/eager_torch_raw.csv
rm -f "$ours_raw" "$peer_raw"
flags=(--oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -np 1)
[ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)

run_one() {  # IMPL PRECISION ROUND
  local impl=$1 precision=$2 round=$3
  local mixed=no warmup=$warmup iters=$iters
  [ "$precision" = bf16 ] && { mixed=bf16; warmup=1; iters=$bf16_iters; }
  echo "bench/eager: round $((round + 1))/$rounds: $impl, $precision" >&2
  if [ "$impl" = ours ]; then
    mpirun "${flags[@]}" "$ours" --label "ours_$precision" --csv "$ours_raw" --warmup "$warmup" \
      --iters "$iters" "${model_args[@]}" distributed.strategy=no "distributed.mixed_precision=$mixed" >/dev/null
  else
    OMP_NUM_THREADS=1 "$python" "$here/torch_eager.py" --label "round$round" --csv "$peer_raw" \
      --optimizer "${impl#torch_}" --precision "$precision" --warmup "$warmup" --iters "$iters" "${model_args[@]}"
  fi
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
impls=(ours torch_default torch_fused)
for ((round = 0; round < rounds; ++round)); do
  for precision in $precisions; do
    order=("${impls[@]}")
    ((round % 2 == 1)) && order=(torch_fused torch_default ours)
    for impl in "${order[@]}"; do run_one "$impl" "$precision" "$round"; done
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

"$python" "$here/summarize.py" "$ours_raw" "$peer_raw" "$out/eager.csv" \
  --note "$rounds rounds x $iters timed steps (+$warmup warmup; bf16 $bf16_iters +1), 1 thread, $(nproc) cores, load average $load_before before, $load_after after"
