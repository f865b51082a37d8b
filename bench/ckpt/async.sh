#!/bin/bash
# Asynchronous checkpoint benchmark (docs/benchmarks.md, "Asynchronous
# checkpoints"): the bundled GPT scaled to ~1 GiB of model + AdamW state
# (12 layers, width 768, 85M parameters), trained under DDP by `mpiaccel
# train` at np 1, 2 and 4 with a checkpoint every 8 steps (26 steps: saves at 8, 16 and 24), once with
# [checkpoint] async = false and once with true, beside PyTorch DCP's save
# and async_save of the same model and optimizer state (dcp_gpt.py, torch
# from the project's .venv, gloo) on the same ranks, in the same run.
#   usage: async.sh BUILD_DIR OUT_DIR [NPS]
set -eu
build=$1
out=$2
nps=${3:-1 2 4}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
python=${MPIACCEL_VENV_PYTHON:-$root/.venv/bin/python}
mpiexec=${MPIACCEL_MPIEXEC:-mpirun}
flags=${MPIACCEL_MPIEXEC_FLAGS:---oversubscribe --bind-to none $([ "$(id -u)" = 0 ] && echo --allow-run-as-root)}
model="model.n_layer=12 model.n_head=12 model.n_embd=768"
mkdir -p "$out"
data=$out/async_data
rm -rf "$data"
mkdir -p "$data"
trap 'rm -rf "$data"' EXIT
report=$out/bench_ckpt_async.txt
: > "$report"
for np in $nps; do
  for mode in false true; do
    # shellcheck disable=SC2086
    $mpiexec $flags -np "$np" -x OMP_NUM_THREADS=1 "$build/bin/mpiaccel" train \
      --config "$root/jobs/fortunes-gpt.ini" $model train.batch_size=1 train.seq_len=32 \
      train.max_steps=26 train.eval_every=0 train.eval_batches=1 train.sample_tokens=0 \
      train.log_every=4 checkpoint.dir="$data/ours_${np}_$mode" checkpoint.every_steps=8 \
      checkpoint.keep_last=1 checkpoint.async=$mode logging.trace="$out/trace_np${np}_async_$mode.json" \
      logging.metrics_file="$data/metrics.jsonl" logging.progress=off > "$data/log" 2>&1 ||
      { cat "$data/log"; exit 1; }
    rm -rf "$data/ours_${np}_$mode"
  done
  python3 "$here/summarize_async.py" "$np" "$out/trace_np${np}_async_false.json" \
    "$out/trace_np${np}_async_true.json" | tee -a "$report"
  port=$((20000 + RANDOM % 20000))
  # shellcheck disable=SC2086
  $mpiexec $flags -np "$np" -x OMP_NUM_THREADS=1 -x MASTER_PORT=$port -x MASTER_ADDR=127.0.0.1 \
    "$python" "$here/dcp_gpt.py" "$data/dcp" --layers 12 --heads 12 --width 768 --vocab 256 \
    --seq 32 --steps 6 | tee -a "$report"
  rm -rf "$data/dcp"
done
echo "report: $report"
