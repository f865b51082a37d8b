#!/usr/bin/env bash
# Pipeline parallelism of the Llama against PyTorch's own: ours (bench_pp:
# the bundled Llama cut by Accelerator::pipeline_parallelize, each schedule)
# beside transformers' LlamaForCausalLM cut into the same stages and run by
# torch.distributed.pipelining (bench/pp/torch_pp.py: PipelineStage with
# ScheduleGPipe, Schedule1F1B and ScheduleInterleaved1F1B, gloo), the .venv's
# torch (the LibTorch ours links), one thread per rank, fp32, the same sizes,
# batch and microbatches on both sides: 8 layers, width 256, 8 query and 4
# key/value heads, SwiGLU 704, vocabulary 2048, untied head, seq_len 64,
# batch 16 in 8 microbatches. Ranks = pp (no data parallelism), pp 2 and 4;
# on a 2-core machine pp 4 oversubscribes the cores alike on both sides.
#
# Measured: step time (the slowest rank's, median over steps; the better of
# the rounds), and ours' bubble: the share of the slowest rank's
# forward-backward time a rank does not compute (waits for a message or
# idles), mean over ranks, beside the theory of each schedule.
#
#   run.sh BUILD_DIR [OUT_DIR]          (OUT_DIR defaults to BUILD_DIR/bench)
# Environment: PP_ROUNDS (2), PP_WARMUP (2), PP_ITERS (5), PP_SIZES ("2 4").
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${1:?usage: run.sh BUILD_DIR [OUT_DIR]}
out=${2:-$build/bench}
rounds=${PP_ROUNDS:-2}
warmup=${PP_WARMUP:-2}
iters=${PP_ITERS:-5}
read -r -a sizes_pp <<<"${PP_SIZES:-2 4}"
micro=8
sizes=(--n-layer 8 --n-embd 256 --n-head 8 --n-kv-head 4 --intermediate 704 --vocab 2048 --seq-len 64 --batch 16)
ours=$build/bin/bench_pp
python=${MPIACCEL_VENV_PYTHON:-$(cd "$here/../.." && pwd)/.venv/bin/python}
[ -x "$ours" ] || { echo "bench/pp: $ours not found: build it with cmake --build $build --target bench_pp" >&2; exit 1; }
"$python" -c 'import torch, transformers' 2>/dev/null ||
  { echo "bench/pp: $python cannot import torch and transformers: run make deps" >&2; exit 1; }

mkdir -p "$out"
raw=$out/pp_raw.csv
rm -f "$raw"
flags=(--oversubscribe --bind-to none -x OMP_NUM_THREADS=1)
[ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

run_ours() {  # PP SCHEDULE
  mpirun "${flags[@]}" -np "$1" "$ours" --label "pp$1-$2" --csv "$raw" --warmup "$warmup" --iters "$iters" \
    "${sizes[@]}" parallelism.pp_size="$1" parallelism.pp_schedule="$2" parallelism.pp_microbatches=$micro
}
run_torch() {  # PP SCHEDULE
  MASTER_PORT=$port mpirun "${flags[@]}" -x MASTER_PORT -np "$1" "$python" "$here/torch_pp.py" --label "pp$1-$2" \
    --csv "$raw" --warmup "$warmup" --iters "$iters" "${sizes[@]}" --microbatches $micro --schedule "$2"
}

for round in $(seq "$rounds"); do
  echo "bench/pp: round $round of $rounds"
  for pp in "${sizes_pp[@]}"; do
    for schedule in gpipe 1f1b interleaved_1f1b; do
      run_ours "$pp" "$schedule"
      run_torch "$pp" "$schedule"
    done
    run_ours "$pp" zb_h1
  done
done
/usr/bin/python3 "$here/summarize.py" "$raw" "$out/pp.csv"
