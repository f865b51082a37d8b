#!/usr/bin/env bash
# Tensor parallelism of the Llama against PyTorch's own: ours (bench_fsdp
# --model llama with [parallelism] tp_size, and with sequence_parallel) beside
# transformers' LlamaForCausalLM split by DTensor's parallelize_module
# (bench/tp/torch_tp.py: ColwiseParallel/RowwiseParallel, loss_parallel, gloo),
# the .venv's torch (the LibTorch ours links), one thread per rank, fp32, the
# same sizes and batch on both sides: 4 layers, width 512, 8 query and 4
# key/value heads, SwiGLU 1408, vocabulary 2048, untied head, seq_len 64,
# batch 4 (each tp group trains on the same batch). Ranks = tp (no data
# parallelism), tp 2 and 4; on a 2-core machine tp 4 oversubscribes the cores
# alike on both sides.
#
# Measured: step time (the slowest rank's, median over steps; median over
# rounds), per-rank model state (parameters, gradients, AdamW state), ours'
# activations kept for backward (CpuMemoryMeter) at tp 1, t and t with
# sequence parallelism, and ours' bytes sent per step and rank (Open MPI's pml
# monitoring; a run of 2·N steps minus one of N) beside the Megatron formula.
#
#   run.sh BUILD_DIR [OUT_DIR]          (OUT_DIR defaults to BUILD_DIR/bench)
# Environment: TP_ROUNDS (2), TP_WARMUP (2), TP_ITERS (6), TP_SIZES ("2 4").
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${1:?usage: run.sh BUILD_DIR [OUT_DIR]}
out=${2:-$build/bench}
rounds=${TP_ROUNDS:-2}
warmup=${TP_WARMUP:-2}
iters=${TP_ITERS:-6}
read -r -a tps <<<"${TP_SIZES:-2 4}"
sizes=(--n-layer 4 --n-embd 512 --n-head 8 --n-kv-head 4 --intermediate 1408 --vocab 2048 --seq-len 64 --batch 4)
ours=$build/bin/bench_fsdp
python=${MPIACCEL_VENV_PYTHON:-$(cd "$here/../.." && pwd)/.venv/bin/python}
[ -x "$ours" ] || { echo "bench/tp: $ours not found: build it with cmake --build $build --target bench_fsdp" >&2; exit 1; }
"$python" -c 'import torch, transformers' 2>/dev/null ||
  { echo "bench/tp: $python cannot import torch and transformers: run make deps" >&2; exit 1; }

mkdir -p "$out"
ours_raw=$out/tp_ours_raw.csv
peer_raw=$out/tp_torch_raw.csv
bytes_raw=$out/tp_bytes_raw.csv
rm -f "$ours_raw" "$peer_raw" "$bytes_raw"
flags=(--oversubscribe --bind-to none -x OMP_NUM_THREADS=1)
[ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

run_ours() {  # LABEL TP EXTRA...
  local label=$1 tp=$2; shift 2
  local strategy=()
  [ "$tp" = 1 ] && strategy=(distributed.strategy=no)
  mpirun "${flags[@]}" -np "$tp" "$ours" --model llama --label "$label" --csv "$ours_raw" --warmup "$warmup" \
    --iters "$iters" "${sizes[@]}" parallelism.tp_size="$tp" "${strategy[@]}" "$@" > /dev/null
}
run_torch() {  # LABEL TP
  MASTER_PORT=$port mpirun "${flags[@]}" -x MASTER_PORT -np "$2" "$python" "$here/torch_tp.py" --label "$1" \
    --csv "$peer_raw" --warmup "$warmup" --iters "$iters" "${sizes[@]}" > /dev/null
}
# Bytes this rank sent in a whole run of N timed steps (pml monitoring).
sent_bytes() {  # TP N EXTRA...
  local tp=$1 n=$2; shift 2
  local prof
  prof=$(mktemp -d)
  mpirun "${flags[@]}" --mca pml_monitoring_enable 1 --mca pml_monitoring_enable_output 3 \
    --mca pml_monitoring_filename "$prof/p" -np "$tp" "$ours" --model llama --label bytes --csv "$prof/x.csv" \
    --warmup 1 --iters "$n" "${sizes[@]}" parallelism.tp_size="$tp" "$@" > /dev/null 2>&1
  awk '$1 == "E" { s += $4 } END { print s }' "$prof/p.0.prof"
  rm -rf "$prof"
}

for ((round = 0; round < rounds; ++round)); do
  echo "bench/tp: round $((round + 1))/$rounds" >&2
  run_ours "r$round-tp1" 1
  for tp in "${tps[@]}"; do
    if ((round % 2 == 0)); then
      run_ours "r$round-tp$tp" "$tp"; run_ours "r$round-tp$tp-sp" "$tp" parallelism.sequence_parallel=true
      run_torch "r$round-tp$tp" "$tp"
    else
      run_torch "r$round-tp$tp" "$tp"
      run_ours "r$round-tp$tp-sp" "$tp" parallelism.sequence_parallel=true; run_ours "r$round-tp$tp" "$tp"
    fi
  done
done
echo "tp,sequence_parallel,bytes_per_step" > "$bytes_raw"
for tp in "${tps[@]}"; do
  for sp in false true; do
    a=$(sent_bytes "$tp" 3 parallelism.sequence_parallel=$sp)
    b=$(sent_bytes "$tp" 6 parallelism.sequence_parallel=$sp)
    echo "$tp,$sp,$(( (b - a) / 3 ))" >> "$bytes_raw"
  done
done
/usr/bin/python3 "$here/summarize.py" "$ours_raw" "$peer_raw" "$bytes_raw" "$out/tp.csv" "${sizes[@]}"
