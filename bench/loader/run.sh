#!/usr/bin/env bash
# Loader workers on a dataset that is slow to read: steps/s of `mpiaccel
# train` with [train] num_workers 0, 1 and 2, beside PyTorch's DataLoader with
# num_workers 0, 1 and 2 (the .venv's torch 2.11, worker processes, an h5py
# Dataset that reads each batch's rows at once), same run.
#
# The data: Fashion-MNIST's training images as float32 in one HDF5 file
# (h5py's default contiguous layout), repeated to LOADER_ROWS rows (1.2
# million: 3.8 GB), read in shuffled batches of 64 rows: random 3 KB reads.
# Before every run the file's pages are dropped from the page cache
# (posix_fadvise DONTNEED), so batches come from the disk, as from a dataset
# larger than memory. Why so large a file: h5py reads each row through HDF5's
# 64 KB sieve buffer, and the kernel's readahead then caches 64 KB around
# every row; a 188 MB file (60,000 rows) is mostly cached after a few dozen
# batches, and the peer would be timed on a warm file (measured: 252 steps/s
# "cold" on 60,000 rows, 61 on 1.2 million). The model: the bundled MLP
# (784-256-256-10, GELU), AdamW, batch 64, one process, one torch thread; a
# step costs ~1.5 ms of compute, so reading dominates without workers.
#
#   run.sh BUILD_DIR [OUT_DIR]          (OUT_DIR defaults to BUILD_DIR/bench)
#
# steps/s is measured from step LOADER_WARMUP to LOADER_STEPS (the workers'
# start-up left out). Rounds alternate the order of ours and theirs; a figure
# is the median over rounds. Writes OUT_DIR/loader_raw.csv and
# OUT_DIR/loader.csv, prints the table.
# Environment: LOADER_ROUNDS (3), LOADER_STEPS (300), LOADER_WARMUP (50),
# LOADER_WORKERS ("0 1 2"), LOADER_ROWS (1200000), MPIACCEL_VENV_PYTHON.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:?usage: run.sh BUILD_DIR [OUT_DIR]}
out=${2:-$build/bench}
rounds=${LOADER_ROUNDS:-3}
steps=${LOADER_STEPS:-300}
warmup=${LOADER_WARMUP:-50}
read -r -a worker_counts <<<"${LOADER_WORKERS:-0 1 2}"
rows=${LOADER_ROWS:-1200000}
python=${MPIACCEL_VENV_PYTHON:-$root/.venv/bin/python}
ours=$build/bin/mpiaccel
[ -x "$ours" ] || { echo "bench/loader: $ours not found: run make build" >&2; exit 1; }
"$python" -c 'import torch, h5py' 2>/dev/null ||
  { echo "bench/loader: $python cannot import torch and h5py: run make deps" >&2; exit 1; }

mkdir -p "$out"
work=$out/loader_work
mkdir -p "$work"
data=$work/fashion_$rows.h5
[ -f "$data" ] || /usr/bin/python3 "$root/tests/python/write_hdf5_arrays.py" fashion "$data" "$rows" contiguous
raw=$out/loader_raw.csv
echo "impl,workers,round,steps_per_s" > "$raw"
drop_cache() { "$python" -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$data"; }

flags=(--oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -np 1)
[ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
run_ours() {  # ROUND WORKERS
  drop_cache
  local metrics=$work/ours_w$2.jsonl
  rm -f "$metrics"
  mpirun "${flags[@]}" "$ours" train --config "$root/jobs/fashion-mnist-cnn.ini" distributed.strategy=no \
    train.model=mlp model.hidden_size=256 model.mlp_layers=2 train.dataset=hdf5 train.data_dir="$data" \
    train.batch_size=64 train.val_fraction=0.01 train.max_steps="$steps" train.eval_every=0 \
    train.log_every="$warmup" train.num_workers="$2" logging.progress=off logging.metrics_file="$metrics" \
    checkpoint.dir="$work/ckpt" checkpoint.save_at_end=false > "$work/ours_w$2.out" 2>&1 ||
    { cat "$work/ours_w$2.out" >&2; return 1; }
  /usr/bin/python3 - "$metrics" "$warmup" "$steps" "$1" "$2" >> "$raw" <<'PY'
import json, sys
at = {r["step"]: r["elapsed_s"] for r in map(json.loads, open(sys.argv[1])) if "loss" in r}
first, last = int(sys.argv[2]), int(sys.argv[3])
print(f"ours,{sys.argv[5]},{sys.argv[4]},{(last - first) / (at[last] - at[first]):.2f}")
PY
}
run_torch() {  # ROUND WORKERS
  drop_cache
  OMP_NUM_THREADS=1 "$python" "$here/torch_loader.py" --data "$data" --workers "$2" --steps "$steps" \
    --warmup "$warmup" --label "$1" >> "$raw"
}
for ((round = 0; round < rounds; ++round)); do
  echo "bench/loader: round $((round + 1))/$rounds" >&2
  for w in "${worker_counts[@]}"; do
    if ((round % 2 == 0)); then run_ours "$round" "$w"; run_torch "$round" "$w"
    else run_torch "$round" "$w"; run_ours "$round" "$w"; fi
  done
done
/usr/bin/python3 - "$raw" "$out/loader.csv" "$rounds" "$rows" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
def med(impl, w):
    return statistics.median(float(r["steps_per_s"]) for r in rows if r["impl"] == impl and r["workers"] == w)
workers = sorted({r["workers"] for r in rows}, key=int)
with open(sys.argv[2], "w") as f:
    f.write("workers,ours_steps_per_s,torch_steps_per_s\n")
    for w in workers:
        f.write(f"{w},{med('ours', w):.1f},{med('torch', w):.1f}\n")
print(f"Loader on a cold HDF5 file (Fashion-MNIST float32, {int(sys.argv[4]):,} rows), batch 64, MLP, one process, "
      f"steps/s, median of {sys.argv[3]} rounds:")
print(f"{'workers':>8}{'ours':>10}{'PyTorch':>10}{'ours/them':>11}{'ours vs 0 workers':>19}")
for w in workers:
    print(f"{w:>8}{med('ours', w):10.1f}{med('torch', w):10.1f}{med('ours', w) / med('torch', w):10.2f}x"
          f"{med('ours', w) / med('ours', workers[0]):18.2f}x")
print("ours/them above 1.0: ours is faster (goal >= 1.0)")
PY
