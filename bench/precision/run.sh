#!/usr/bin/env bash
# Mixed-precision communication: the DDP benchmark step (bench/ddp's MLP,
# bench_ddp) at 2 ranks with [distributed] reduce_dtype = fp32 and = bf16, and
# PyTorch's DDP without and with its fp16_compress_hook (the same bytes as
# bf16; torch 1.13 refuses its bf16 hook without CUDA), under the same mpirun.
# The bf16 all-reduce should move half the bytes and take about half the time.
#
#   run.sh BUILD_DIR [OUT_DIR]          (OUT_DIR defaults to BUILD_DIR/bench)
#
# Environment: PREC_ROUNDS (2), PREC_WARMUP (5), PREC_ITERS (20), PREC_NP (2).
# Writes OUT_DIR/precision_raw.csv and prints the table.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${1:?usage: run.sh BUILD_DIR [OUT_DIR]}
out=${2:-$build/bench}
rounds=${PREC_ROUNDS:-2}
warmup=${PREC_WARMUP:-5}
iters=${PREC_ITERS:-20}
np=${PREC_NP:-2}
ours=$build/bin/bench_ddp
python=/usr/bin/python3
[ -x "$ours" ] || { echo "bench/precision: $ours not found: build the bench_ddp target" >&2; exit 1; }

mkdir -p "$out"
raw=$out/precision_raw.csv
echo "impl,ranks,round,iter,step_ms,forward_ms,backward_ms,optimizer_ms,cpu_ms,comm_ms,hidden_ms,exposed_ms,reduce" > "$raw"
flags=(--oversubscribe --bind-to none -x OMP_NUM_THREADS=1)
[ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
common=(--warmup "$warmup" --iters "$iters" --optimizer sgd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

have_torch=1
"$python" -c 'import torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null || have_torch=0

run_ours() {  # DTYPE ROUND
  local part=$tmp/ours_$1.csv
  : > "$part"
  mpirun "${flags[@]}" -np "$np" "$ours" --raw "$part" "${common[@]}" --round "$2" \
    "distributed.reduce_dtype=$1" 2> "$tmp/stderr"
  grep -o 'all-reduced bytes per step: [0-9]*' "$tmp/stderr" | awk '{print $NF}' > "$tmp/bytes_$1"
  sed "s/\$/,$1/" "$part" >> "$raw"
}

run_torch() {  # HOOK ROUND
  [ "$have_torch" = 1 ] || return 0
  local part=$tmp/torch_$1.csv port
  : > "$part"
  port=$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  mpirun "${flags[@]}" -np "$np" -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT="$port" -x GLOO_SOCKET_IFNAME=lo \
    "$python" "$here/../ddp/torch_ddp.py" --raw "$part" "${common[@]}" --round "$2" --comm-hook "$1"
  local tag=fp32
  [ "$1" = fp16 ] && tag=bf16  # the 16-bit row
  sed "s/\$/,$tag/" "$part" >> "$raw"
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for ((round = 0; round < rounds; ++round)); do
  echo "bench/precision: round $((round + 1))/$rounds" >&2
  run_ours fp32 "$round"; run_ours bf16 "$round"
  run_torch none "$round"; run_torch fp16 "$round"
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

"$python" - "$raw" "$(cat "$tmp/bytes_fp32")" "$(cat "$tmp/bytes_bf16")" "$np" \
  "$rounds x $iters steps (+$warmup warmup), load $load_before before, $load_after after" <<'PY'
import csv, statistics, sys
raw, bytes32, bytes16, np, note = sys.argv[1:6]
rows = list(csv.DictReader(open(raw)))
def med(impl, reduce, col):
    v = [float(r[col]) for r in rows if r["impl"] == impl and r["reduce"] == reduce and r[col] != ""]
    return statistics.median(v) if v else float("nan")
print(f"DDP step at np {np}, gradient all-reduce in fp32 vs bf16 ({note})")
print(f"{'side':<26}{'bytes/step':>12}{'step ms':>10}{'all-reduce ms':>15}{'exposed ms':>12}")
for reduce, b in (("fp32", bytes32), ("bf16", bytes16)):
    print(f"{'ours reduce_dtype=' + reduce:<26}{int(b):>12}{med('ours', reduce, 'step_ms'):>10.1f}"
          f"{med('ours', reduce, 'comm_ms'):>15.1f}{med('ours', reduce, 'exposed_ms'):>12.1f}")
for reduce, label in (("fp32", "torch DDP"), ("bf16", "torch DDP fp16 hook")):
    s = med("torch", reduce, "step_ms")
    if s == s:
        print(f"{label:<26}{'':>12}{s:>10.1f}{'':>15}{'':>12}")
c32, c16 = med("ours", "fp32", "comm_ms"), med("ours", "bf16", "comm_ms")
print(f"16-bit/fp32: bytes {int(bytes16) / int(bytes32):.2f}, all-reduce time {c16 / c32:.2f}, "
      f"step time ours {med('ours', 'bf16', 'step_ms') / med('ours', 'fp32', 'step_ms'):.2f}, "
      f"torch {med('torch', 'bf16', 'step_ms') / med('torch', 'fp32', 'step_ms'):.2f}")
PY
