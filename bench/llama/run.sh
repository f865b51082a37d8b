#!/usr/bin/env bash
# The Llama's single-process step against the same model in PyTorch:
# ours (bench_fsdp --model llama, strategy no, one rank) and transformers'
# LlamaForCausalLM (SDPA attention) trained by PyTorch eager with its AdamW
# as a user gets it and with fused=True, its best on the CPU
# (bench/eager/torch_eager.py --model llama), the .venv's torch
# (the LibTorch ours links), one thread each, fp32. The model: 8 layers, width
# 512, 8 query and 4 kv heads, SwiGLU 1408, vocabulary 2048, untied head (26M
# parameters), seq_len 64, batch 2, AdamW with clipping at 1.0. A step is
# forward + loss, backward, clip, step, zero_grad, each timed.
#
#   run.sh BUILD_DIR [OUT_DIR]          (OUT_DIR defaults to BUILD_DIR/bench)
#
# Rounds alternate the order of the two; a figure is the median over rounds of
# each run's median step. Writes OUT_DIR/llama_raw.csv and prints the table.
# Environment: LLAMA_ROUNDS (3), LLAMA_WARMUP (2), LLAMA_ITERS (6),
# LLAMA_MODEL_ARGS (replaces the sizes, e.g. "--n-layer 2 --n-embd 128 ...").
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${1:?usage: run.sh BUILD_DIR [OUT_DIR]}
out=${2:-$build/bench}
rounds=${LLAMA_ROUNDS:-3}
warmup=${LLAMA_WARMUP:-2}
iters=${LLAMA_ITERS:-6}
read -r -a sizes <<<"${LLAMA_MODEL_ARGS:---n-layer 8 --n-embd 512 --n-head 8 --n-kv-head 4 --intermediate 1408 --vocab 2048 --seq-len 64 --batch 2}"
ours=$build/bin/bench_fsdp
python=${MPIACCEL_VENV_PYTHON:-$(cd "$here/../.." && pwd)/.venv/bin/python}
[ -x "$ours" ] || { echo "bench/llama: $ours not found: build it with cmake --build $build --target bench_fsdp" >&2; exit 1; }
"$python" -c 'import torch, transformers' 2>/dev/null ||
  { echo "bench/llama: $python cannot import torch and transformers: run make deps" >&2; exit 1; }

mkdir -p "$out"
ours_raw=$out/llama_ours_raw.csv
peer_raw=$out/llama_torch_raw.csv
rm -f "$ours_raw" "$peer_raw"
flags=(--oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -np 1)
[ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
run_ours() {
  mpirun "${flags[@]}" "$ours" --model llama --label "round$1" --csv "$ours_raw" --warmup "$warmup" --iters "$iters" \
    "${sizes[@]}" distributed.strategy=no > /dev/null
}
run_torch() {  # ROUND default|fused
  OMP_NUM_THREADS=1 "$python" "$here/../eager/torch_eager.py" --model llama --label "round$1" --csv "$peer_raw" \
    --optimizer "$2" --warmup "$warmup" --iters "$iters" "${sizes[@]}" > /dev/null
}
for ((round = 0; round < rounds; ++round)); do
  echo "bench/llama: round $((round + 1))/$rounds" >&2
  if ((round % 2 == 0)); then
    run_ours "$round"; run_torch "$round" default; run_torch "$round" fused
  else
    run_torch "$round" fused; run_torch "$round" default; run_ours "$round"
  fi
done
/usr/bin/python3 - "$ours_raw" "$peer_raw" "$out/llama.csv" "$rounds" <<'PY'
import csv, statistics, sys
ours = list(csv.DictReader(open(sys.argv[1])))
peer = list(csv.DictReader(open(sys.argv[2])))
sides = [("ours", ours)] + [(f"PyTorch {impl[6:]} AdamW", [r for r in peer if r["impl"] == impl])
                            for impl in ("torch_default", "torch_fused")]
cols = ["step_ms", "forward_ms", "backward_ms", "optimizer_ms"]
med = lambda rows, c: statistics.median(float(r[c]) for r in rows)
with open(sys.argv[3], "w") as f:
    f.write("impl,params," + ",".join(cols) + "\n")
    for name, rows in sides:
        f.write(f"{name},{rows[0]['params']}," + ",".join(f"{med(rows, c):.1f}" for c in cols) + "\n")
print(f"Llama step, one process, one thread, fp32 ({ours[0]['params']} parameters ours, "
      f"{peer[0]['params']} transformers'), median of {sys.argv[4]} rounds:")
print(f"{'':28}{'step ms':>10}{'forward':>10}{'backward':>10}{'optimizer':>10}{'ours/them':>11}")
for name, rows in sides:
    print(f"{name:28}" + "".join(f"{med(rows, c):10.1f}" for c in cols)
          + f"{med(rows, 'step_ms') / med(ours, 'step_ms'):10.2f}x")
print("ours/them is their step time over ours: above 1.0, ours is faster (goal >= 1.0)")
PY
