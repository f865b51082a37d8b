#!/usr/bin/env bash
# The GPU checks of mpiaccel, as one call on a bare GPU machine (one H200:
# CUDA 13, Python's torch 2.11 with its LibTorch, CMake and ninja; no MPI,
# parallel HDF5, inih, Boost or SentencePiece, and no package registry:
# docs/benchmarks.md, "GPU"). Meant to finish in under 8 minutes:
#   1. unpack bench/gpu/debs/*.deb (fetched beforehand by `make gpu-debs` on a
#      machine with Debian 12's registry) into a prefix, never into /, and
#      point PATH, LD_LIBRARY_PATH, OPAL_PREFIX and pkg-config at it;
#   2. configure against that machine's own torch LibTorch and build (ninja,
#      all cores) the mpiaccel command, the gpu-labelled tests and the
#      benchmark;
#   3. the benchmark: GPT-2 small, bf16, world size 1 — ours (no-dist, DDP,
#      FSDP) and PyTorch eager from the same machine's python3 torch, same
#      model, batch and sequence length, in this run; tokens/s and MFU;
#   4. ctest -L gpu;
#   5. jobs/gpt2-small-gpu.ini as shipped for a few steps, if time is left.
# Every figure goes into one file, $OUT/gpu_report.txt, and the commands'
# output into $OUT/gpu_run.log and $OUT/ctest_gpu.log ($OUT: the device tool's
# output folder; build-gpu/out when unset).
#
#   bash bench/gpu/run.sh            run it
#   bash bench/gpu/run.sh --dry-run  print what it would do, run nothing (the
#                                    test suite runs this)
set -uo pipefail

DRY=0
case "${1:-}" in
  --dry-run) DRY=1 ;;
  "") ;;
  *) echo "usage: bash bench/gpu/run.sh [--dry-run]" >&2; exit 2 ;;
esac

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DEBS=$ROOT/bench/gpu/debs
BUILD=${MPIACCEL_GPU_BUILD:-$ROOT/build-gpu}
PREFIX=${MPIACCEL_GPU_PREFIX:-/tmp/mpiaccel-gpu-deps}
OUT=${OUT:-$BUILD/out}
PYTHON=${PYTHON:-python3}
JOBS=$(nproc)
BATCH=16 SEQ=1024 STEPS=20 WARMUP=5
BUDGET_S=470  # the shipped job runs only if this much is not yet spent
REPORT=$OUT/gpu_report.txt
LOG=$OUT/gpu_run.log
START=$SECONDS
cd "$ROOT" || exit 1

report() { echo "$*"; [ $DRY = 1 ] || echo "$*" >> "$REPORT"; }
# run NAME TIMEOUT CMD...: shows the command; runs it (unless --dry-run) with
# its output in the log, and reports its status and time.
run() {
  local name=$1 limit=$2 begin=$SECONDS status
  shift 2
  echo "+ $*"
  [ $DRY = 1 ] && return 0
  echo "=== $name: $*" >> "$LOG"
  timeout "$limit" "$@" >> "$LOG" 2>&1
  status=$?
  report "phase $name: exit $status after $((SECONDS - begin)) s"
  return $status
}

if [ $DRY = 0 ]; then
  mkdir -p "$OUT"
  : > "$REPORT"
  : > "$LOG"
fi
report "mpiaccel GPU run, $(date -u +%FT%TZ), $(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown)"

# ---- 0. what the machine has
if [ $DRY = 0 ]; then
  report "gpu: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)"
  report "torch: $($PYTHON -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tail -1)"
  report "cpus: $JOBS"
  TORCH_ROOT=$($PYTHON -c 'import os, torch; print(os.path.dirname(torch.__file__))')
else
  echo "(probe: nvidia-smi, $PYTHON's torch version; TORCH_ROOT = dirname(torch.__file__))"
  TORCH_ROOT='<dirname of python3 torch>'
fi

# ---- 1. the Debian packages, unpacked into a prefix
echo "+ source bench/gpu/deps_env.sh; unpack_debs: $DEBS/*.deb into $PREFIX ($(ls "$DEBS"/*.deb 2>/dev/null | wc -l) packages here)"
# shellcheck source=deps_env.sh
source "$ROOT/bench/gpu/deps_env.sh"
if [ $DRY = 0 ]; then
  unpack_debs || { report "FAIL: unpacking $DEBS"; exit 1; }
  missing=$(gpu_deps_missing)
  [ -z "$missing" ] || report "WARNING: libraries the unpacked packages need and the machine lacks: $missing"
fi
echo "+ export OPAL_PREFIX=$OPAL_PREFIX PATH=$PREFIX/usr/bin:... LD_LIBRARY_PATH=$GPU_DEPS_LIB:... PKG_CONFIG_SYSROOT_DIR=$PREFIX"
MPIRUN=(mpirun.openmpi --oversubscribe --bind-to none -x OMP_NUM_THREADS=4)

# ---- 2. configure and build against this machine's torch LibTorch
GENERATOR=Ninja
command -v ninja > /dev/null || GENERATOR="Unix Makefiles"
run configure 180 cmake -S "$ROOT" -B "$BUILD" -G "$GENERATOR" -DCMAKE_BUILD_TYPE=Release \
  "-DCMAKE_PREFIX_PATH=$TORCH_ROOT" \
  "${GPU_DEPS_CMAKE_FLAGS[@]}" \
  -DMPIACCEL_WITH_NCCL=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  || { report "FAIL: configure (see gpu_run.log)"; exit 1; }
# The gpu-labelled tests' programs (a script test needs only the command).
if [ $DRY = 0 ]; then
  TARGETS=$(ctest --test-dir "$BUILD" -N -L gpu | sed -nE 's/^ *Test +#[0-9]+: (mpi_test_[a-z0-9_]+)_np[0-9]+$/\1/p' | sort -u | tr '\n' ' ')
else
  TARGETS='<the programs of ctest -N -L gpu>'
fi
# shellcheck disable=SC2086
run build 330 cmake --build "$BUILD" -j "$JOBS" --target mpiaccel_tool bench_gpu_gpt $TARGETS \
  || { report "FAIL: build (see gpu_run.log)"; exit 1; }

# ---- 3. the benchmark: ours beside PyTorch eager, same model, batch, sequence
report "benchmark: GPT-2 small (12 x 768, 12 heads, vocab 50304), bf16, batch $BATCH x $SEQ tokens, $STEPS steps after $WARMUP"
for strategy in no ddp fsdp; do
  run "ours-$strategy" 150 "${MPIRUN[@]}" -np 1 "$BUILD/bin/bench_gpu_gpt" "$strategy" $BATCH $SEQ $STEPS $WARMUP
done
run eager 150 "$PYTHON" "$ROOT/bench/gpu/eager_gpt.py" $BATCH $SEQ $STEPS $WARMUP
if [ $DRY = 0 ]; then
  grep -E '^(ours|eager) ' "$LOG" >> "$REPORT"
  "$PYTHON" - "$REPORT" <<'PY' | tee -a "$REPORT"
import re, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.match(r"(ours|eager) (?:strategy=(\S+) )?.*tokens_per_s=(\S+) mfu=(\S+) step_ms=(\S+)", line)
    if m:
        rows[f"{m[1]} {m[2]}" if m[2] else m[1]] = (float(m[3]), float(m[4]), float(m[5]))
eager = rows.get("eager")
print(f"{'run':<12}{'tokens/s':>12}{'MFU':>8}{'step ms':>10}{'vs eager':>10}")
for name, (tps, mfu, ms) in rows.items():
    ratio = f"{tps / eager[0]:.2f}x" if eager else "-"
    print(f"{name:<12}{tps:>12.0f}{100 * mfu:>7.1f}%{ms:>10.1f}{ratio:>10}")
print("goals: ours >= 1.0x eager's tokens/s; MFU >= 40 % of the H200's dense bf16 peak (989 TFLOP/s)")
PY
fi

# ---- 4. the gpu-labelled tests
echo "+ ctest --test-dir $BUILD -L gpu --output-on-failure --timeout 300 > $OUT/ctest_gpu.log"
if [ $DRY = 0 ]; then
  begin=$SECONDS
  timeout 420 ctest --test-dir "$BUILD" -L gpu --output-on-failure --timeout 300 > "$OUT/ctest_gpu.log" 2>&1
  report "phase ctest-gpu: exit $? after $((SECONDS - begin)) s"
  grep -E 'tests passed|Passed|Failed|\*\*\*' "$OUT/ctest_gpu.log" >> "$REPORT"
fi

# ---- 5. the shipped GPU job, a few steps, if the budget allows
if [ $DRY = 1 ] || [ $((SECONDS - START)) -lt $BUDGET_S ]; then
  # As shipped: its first run tokenizes the fortunes into runs/fortunes-bpe
  # ([train] tokenize_from), here from where this machine has them.
  FORTUNES=/usr/share/games/fortunes
  [ -d "$FORTUNES" ] || FORTUNES=$PREFIX/usr/share/games/fortunes
  run gpt2-small-job 270 "${MPIRUN[@]}" -np 1 "$BUILD/bin/mpiaccel" train --config "$ROOT/jobs/gpt2-small-gpu.ini" \
    train.max_steps=30 logging.progress=lines train.tokenize_from="$FORTUNES"
  [ $DRY = 1 ] || grep -E 'training on|step +30|done:|nccl' "$LOG" | tail -4 >> "$REPORT"
else
  report "skipped the shipped job: $((SECONDS - START)) s spent of the $BUDGET_S s budget"
fi
report "total: $((SECONDS - START)) s"
