#!/usr/bin/env bash
# The DDP benchmark: ours (bench_ddp) and PyTorch's own DDP (torch_ddp.py,
# the .venv's torch wheel, the same LibTorch as ours, over gloo) at 1 and 2 ranks, under the same mpirun,
# same model, batch, optimizer and one torch thread per rank.
#
#   run.sh BUILD_DIR [OUT_DIR]          (OUT_DIR defaults to BUILD_DIR/bench)
#
# Besides the four, "solo": two single-rank runs of ours started at once, with
# no communication between them. Their step time is what two ranks cost on
# this machine before any gradient is exchanged (they share caches, memory
# bandwidth and, on a VM, the host), so T1/T(solo) is the best weak scaling
# the machine allows, and T(solo)/T2 what our communication keeps of it.
#
# Environment: DDP_ROUNDS (3), DDP_WARMUP (5), DDP_ITERS (20),
# DDP_OPTIMIZER (sgd | adamw), DDP_TORCH_FUSED (1: the peer's optimizer
# steps with its fused CPU kernel, fused=True; 0: its default loop),
# MPIACCEL_VENV_PYTHON (the peer's python, .venv/bin/python), DDP_BUCKET_CAP_MB (25), DDP_BUCKET_VIEW (1:
# gradient_as_bucket_view on both sides, our default; 0 = PyTorch's default,
# gradients copied into the buckets and back), and DDP_OURS_ARGS
# (extra section.key=value overrides for ours). Each round runs the four
# configurations, in the opposite order to the round before, so slow drift
# of a shared machine hits both sides alike. Writes OUT_DIR/ddp_raw.csv (one
# row per timed step) and OUT_DIR/ddp.csv (the summary), prints the table.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${1:?usage: run.sh BUILD_DIR [OUT_DIR]}
out=${2:-$build/bench}
rounds=${DDP_ROUNDS:-3}
warmup=${DDP_WARMUP:-5}
iters=${DDP_ITERS:-20}
optimizer=${DDP_OPTIMIZER:-sgd}
bucket_cap_mb=${DDP_BUCKET_CAP_MB:-25}
bucket_view=${DDP_BUCKET_VIEW:-1}
case $bucket_view in 0) bucket_view_word=false ;; 1) bucket_view_word=true ;;
  *) echo "bench/ddp: DDP_BUCKET_VIEW must be 0 or 1, not '$bucket_view'" >&2; exit 1 ;; esac
ours=$build/bin/bench_ddp
torch_fused=${DDP_TORCH_FUSED:-1}
python=${MPIACCEL_VENV_PYTHON:-$(cd "$here/../.." && pwd)/.venv/bin/python}

if [ ! -x "$ours" ]; then
  echo "bench/ddp: $ours not found: build it with cmake --build $build --target bench_ddp" >&2
  exit 1
fi
have_torch=1
if ! "$python" -c 'import torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null; then
  echo "bench/ddp: $python cannot import torch with gloo: run make deps (the .venv's torch)" \
       "to measure the peer; measuring ours only" >&2
  have_torch=0
fi

mkdir -p "$out"
raw=$out/ddp_raw.csv
echo "impl,ranks,round,iter,step_ms,forward_ms,backward_ms,optimizer_ms,cpu_ms,comm_ms,hidden_ms,exposed_ms" > "$raw"
flags=(--oversubscribe --bind-to none -x OMP_NUM_THREADS=1)
[ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
common=(--raw "$raw" --warmup "$warmup" --iters "$iters" --optimizer "$optimizer")

free_port() {
  "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

run_one() {  # IMPL NP ROUND
  local impl=$1 np=$2 round=$3
  if [ "$impl" = solo ]; then
    local k
    for ((k = 0; k < np; ++k)); do
      # shellcheck disable=SC2086  # DDP_OURS_ARGS is a list of overrides
      mpirun "${flags[@]}" -np 1 "$ours" --raw "$raw.solo$k" --warmup "$warmup" --iters "$iters" \
        --optimizer "$optimizer" --round "$round" --label solo \
        "ddp.bucket_cap_mb=$bucket_cap_mb" "ddp.gradient_as_bucket_view=$bucket_view_word" \
        ${DDP_OURS_ARGS:-} &
    done
    wait
    for ((k = 0; k < np; ++k)); do cat "$raw.solo$k" >> "$raw"; rm -f "$raw.solo$k"; done
  elif [ "$impl" = ours ]; then
    # shellcheck disable=SC2086  # DDP_OURS_ARGS is a list of overrides
    mpirun "${flags[@]}" -np "$np" "$ours" "${common[@]}" --round "$round" \
      "ddp.bucket_cap_mb=$bucket_cap_mb" "ddp.gradient_as_bucket_view=$bucket_view_word" ${DDP_OURS_ARGS:-}
  else
    [ "$have_torch" = 1 ] || return 0
    mpirun "${flags[@]}" -np "$np" -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT="$(free_port)" \
      -x GLOO_SOCKET_IFNAME=lo "$python" "$here/torch_ddp.py" "${common[@]}" --round "$round" \
      --bucket-cap-mb "$bucket_cap_mb" --gradient-as-bucket-view "$bucket_view" --fused "$torch_fused"
  fi
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
order=("ours 1" "ours 2" "torch 1" "torch 2" "solo 2")
for ((round = 0; round < rounds; ++round)); do
  if ((round % 2 == 0)); then seq=(0 4 1 2 3); else seq=(3 2 1 4 0); fi
  for k in "${seq[@]}"; do
    read -r impl np <<<"${order[$k]}"
    echo "bench/ddp: round $((round + 1))/$rounds: $impl, $np rank(s)" >&2
    run_one "$impl" "$np" "$round"
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

"$python" "$here/summarize.py" "$raw" "$out/ddp.csv" \
  --note "optimizer $optimizer (peer fused=$torch_fused), bucket_cap_mb $bucket_cap_mb, gradient_as_bucket_view $bucket_view_word, $rounds rounds x $iters timed steps (+$warmup warmup), $(nproc) cores, load average $load_before before, $load_after after"
