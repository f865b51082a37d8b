#!/usr/bin/env bash
# The activation-checkpointing benchmark: peak forward+backward memory against
# step time, with and without [fsdp] activation_checkpointing.
#
#   run.sh BUILD_DIR [OUT_DIR]          (OUT_DIR defaults to BUILD_DIR/bench)
#
# Configs: "fortunes" is jobs/fortunes-gpt.ini as it is (GPT 4 layers, n_embd
# 128, 4 heads, seq_len 64, batch 16 per rank); "long" the same job with 8
# layers and seq_len 256, batch 8 (attention scores grow with T², so the
# activations dominate). Each at every world size of ACTCKPT_NPS under DDP and
# FSDP (TRANSFORMER_BASED_WRAP on DecoderLayer), checkpointing off and on, one
# mpirun each, one torch thread per rank; off and on alternate order between
# rounds. Then the peer (peer.py: the same GPT in PyTorch with
# torch.utils.checkpoint, one process) unless ACTCKPT_PEER=0. Writes
# OUT_DIR/actckpt_raw.csv, OUT_DIR/actckpt.csv (the table's rows) and
# OUT_DIR/actckpt_peer.csv; prints the table.
#
# Environment: ACTCKPT_NPS ("1 2"), ACTCKPT_CONFIGS ("fortunes long"),
# ACTCKPT_STRATEGIES ("ddp fsdp"), ACTCKPT_ROUNDS (1), ACTCKPT_WARMUP (2),
# ACTCKPT_ITERS (5), ACTCKPT_PEER (1).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:?usage: run.sh BUILD_DIR [OUT_DIR]}
out=${2:-$build/bench}
nps=${ACTCKPT_NPS:-1 2}
configs=${ACTCKPT_CONFIGS:-fortunes long}
strategies=${ACTCKPT_STRATEGIES:-ddp fsdp}
rounds=${ACTCKPT_ROUNDS:-1}
warmup=${ACTCKPT_WARMUP:-2}
iters=${ACTCKPT_ITERS:-5}
ours=$build/bin/bench_actckpt
python=/usr/bin/python3

config_overrides() {  # CONFIG -> overrides of jobs/fortunes-gpt.ini
  case $1 in
    fortunes) echo "" ;;
    long) echo "model.n_layer=8 train.seq_len=256 train.batch_size=8" ;;
    *) echo "bench/actckpt: unknown config '$1' in ACTCKPT_CONFIGS (fortunes, long)" >&2; return 1 ;;
  esac
}
strategy_overrides() {  # STRATEGY -> overrides
  case $1 in
    ddp) echo "distributed.strategy=ddp" ;;
    fsdp) echo "distributed.strategy=fsdp fsdp.auto_wrap_policy=TRANSFORMER_BASED_WRAP fsdp.transformer_layer_cls_to_wrap=DecoderLayer" ;;
    *) echo "bench/actckpt: unknown strategy '$1' in ACTCKPT_STRATEGIES (ddp, fsdp)" >&2; return 1 ;;
  esac
}

if [ ! -x "$ours" ]; then
  echo "bench/actckpt: $ours not found: build it with cmake --build $build --target bench_actckpt" >&2
  exit 1
fi
for c in $configs; do config_overrides "$c" >/dev/null; done
for s in $strategies; do strategy_overrides "$s" >/dev/null; done

mkdir -p "$out"
raw=$out/actckpt_raw.csv
rm -f "$raw" "$out/actckpt_peer.csv"
flags=(--oversubscribe --bind-to none -x OMP_NUM_THREADS=1)
[ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
failed=0
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
start=$SECONDS
for ((round = 0; round < rounds; ++round)); do
  if ((round % 2 == 0)); then order="false true"; else order="true false"; fi
  for c in $configs; do for s in $strategies; do for np in $nps; do for ckpt in $order; do
    echo "bench/actckpt: round $((round + 1))/$rounds: $c, $s, $np rank(s), checkpointing $ckpt" >&2
    # shellcheck disable=SC2046  # word lists on purpose
    if ! mpirun "${flags[@]}" -np "$np" "$ours" --label "$c" --csv "$raw" --config "$root/jobs/fortunes-gpt.ini" \
           --warmup "$warmup" --iters "$iters" $(config_overrides "$c") $(strategy_overrides "$s") \
           "fsdp.activation_checkpointing=$ckpt" >/dev/null; then
      echo "bench/actckpt: $c $s np $np checkpointing $ckpt FAILED" >&2
      failed=1
    fi
  done; done; done; done
done

peer_args=()
if [ "${ACTCKPT_PEER:-1}" != 0 ]; then
  echo "bench/actckpt: peer: PyTorch $($python -c 'import torch; print(torch.__version__)' 2>/dev/null || echo '?') torch.utils.checkpoint, one process" >&2
  for c in $configs; do
    case $c in
      fortunes) args=(--n-layer 4 --n-embd 128 --n-head 4 --seq-len 64 --batch 16) ;;
      long) args=(--n-layer 8 --n-embd 128 --n-head 4 --seq-len 256 --batch 8) ;;
    esac
    if OMP_NUM_THREADS=1 "$python" "$here/peer.py" --label "$c" --csv "$out/actckpt_peer.csv" \
         --warmup "$warmup" --iters "$iters" "${args[@]}"; then :; else
      echo "bench/actckpt: peer $c FAILED" >&2
      failed=1
    fi
  done
  [ -s "$out/actckpt_peer.csv" ] && peer_args=(--peer "$out/actckpt_peer.csv")
fi
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

[ -s "$raw" ] || { echo "bench/actckpt: no run succeeded" >&2; exit 1; }
"$python" "$here/summarize.py" "$raw" "$out/actckpt.csv" "${peer_args[@]}" \
  --note "$rounds round(s) x $iters timed steps (+$warmup warmup), $(nproc) cores, $((SECONDS - start)) s, load average $load_before before, $load_after after"
exit "$failed"
