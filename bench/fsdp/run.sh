#!/usr/bin/env bash
# The strategy benchmark (bench_fsdp) and the host AdamW benchmark
# (bench_host_adamw).
#
#   run.sh BUILD_DIR [OUT_DIR]          (OUT_DIR defaults to BUILD_DIR/bench)
#
# Strategy part: the bundled GPT (8 layers, n_embd 704: 48M parameters,
# vocab 256, seq_len 64, batch 2 per rank, AdamW, grad_clip 1.0) at each world
# size of FSDP_NPS under every strategy of FSDP_STRATEGIES, one mpirun each
# (so each run's peak RSS is its own), one torch thread per rank. Each round
# runs the list in the opposite order to the round before, so slow drift of a
# shared machine does not always hit the same strategy. Writes
# OUT_DIR/fsdp_raw.csv (one row per run) and OUT_DIR/fsdp.csv (the summary:
# ratios to DDP at the same world size, model-state bytes against the ZeRO
# formulas), prints the table.
#
# The peers run in the same rounds: torch_ddp and torch_fsdp are PyTorch's
# own DDP and FSDP2 (fully_shard per DecoderLayer) over gloo on the same GPT
# and step (torch_peer.py, the .venv's torch: the LibTorch we link, fused
# AdamW).
#
# At np 1 the label `no` ([distributed] strategy = no, one process) is the
# baseline every strategy is measured against (FSDP_NPS=1 FSDP_STRATEGIES="no
# ddp zero1 zero2 zero3 fsdp torch_fsdp").
#
# Environment: FSDP_NPS ("2 4"), FSDP_ROUNDS (1), FSDP_WARMUP (2), FSDP_ITERS (5),
# FSDP_STRATEGIES (all: "ddp zero1 zero2 zero3 fsdp fsdp_keep zero2_offload
# torch_ddp torch_fsdp"; `no` at np 1 only), MPIACCEL_VENV_PYTHON (the peers' python,
# .venv/bin/python),
# FSDP_MODEL_ARGS (e.g. "--n-layer 2 --n-embd 128" for a quick check),
# FSDP_HOST_ADAMW (1: also run bench_host_adamw; 0: skip it),
# FSDP_ADAMW_ARGS ("--threads 1,2").
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${1:?usage: run.sh BUILD_DIR [OUT_DIR]}
out=${2:-$build/bench}
nps=${FSDP_NPS:-2 4}
rounds=${FSDP_ROUNDS:-1}
warmup=${FSDP_WARMUP:-2}
iters=${FSDP_ITERS:-5}
strategies=${FSDP_STRATEGIES:-ddp zero1 zero2 zero3 fsdp fsdp_keep zero2_offload torch_ddp torch_fsdp}
ours=$build/bin/bench_fsdp
adamw=$build/bin/bench_host_adamw
python=/usr/bin/python3
venv_python=${MPIACCEL_VENV_PYTHON:-$(cd "$here/../.." && pwd)/.venv/bin/python}

overrides_of() {  # LABEL -> the section.key=value overrides of that strategy
  case $1 in
    # gradient_as_bucket_view: DDP holds its gradients once (16Ψ), the
    # baseline of the ZeRO paper, not twice as with the .grad copies.
    no) echo "distributed.strategy=no" ;;  # one process: the baseline of np 1
    ddp) echo "distributed.strategy=ddp ddp.gradient_as_bucket_view=true" ;;
    zero1) echo "distributed.strategy=zero zero.stage=1" ;;
    zero2) echo "distributed.strategy=zero zero.stage=2" ;;
    zero3) echo "distributed.strategy=zero zero.stage=3" ;;
    fsdp) echo "distributed.strategy=fsdp fsdp.auto_wrap_policy=TRANSFORMER_BASED_WRAP fsdp.transformer_layer_cls_to_wrap=DecoderLayer" ;;
    fsdp_keep) echo "distributed.strategy=fsdp fsdp.auto_wrap_policy=TRANSFORMER_BASED_WRAP fsdp.transformer_layer_cls_to_wrap=DecoderLayer fsdp.reshard_after_forward=false" ;;
    zero2_offload) echo "distributed.strategy=zero zero.stage=2 zero.offload_optimizer=cpu" ;;
    torch_ddp | torch_fsdp) ;;  # the peers (torch_peer.py): no overrides
    *) echo "bench/fsdp: unknown strategy label '$1' in FSDP_STRATEGIES" >&2; return 1 ;;
  esac
}

mkdir -p "$out"
failed=0

if [ "${FSDP_HOST_ADAMW:-1}" != 0 ]; then
  if [ -x "$adamw" ]; then
    echo "bench/fsdp: host AdamW against torch::optim::AdamW" >&2
    # shellcheck disable=SC2086  # FSDP_ADAMW_ARGS is a list of arguments
    OMP_NUM_THREADS=2 "$adamw" ${FSDP_ADAMW_ARGS:---threads 1,2} --csv "$out/host_adamw.csv" || failed=1
  else
    echo "bench/fsdp: $adamw not found: build it with cmake --build $build --target bench_host_adamw" >&2
    failed=1
  fi
fi

if [ ! -x "$ours" ]; then
  echo "bench/fsdp: $ours not found: build it with cmake --build $build --target bench_fsdp" >&2
  exit 1
fi
read -r -a labels <<<"$strategies"
for label in "${labels[@]}"; do overrides_of "$label" >/dev/null; done

raw=$out/fsdp_raw.csv
rm -f "$raw"
flags=(--oversubscribe --bind-to none -x OMP_NUM_THREADS=1)
[ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
start=$SECONDS
for ((round = 0; round < rounds; ++round)); do
  runs=()
  for np in $nps; do for label in "${labels[@]}"; do runs+=("$np $label"); done; done
  if ((round % 2 == 1)); then
    for ((i = 0, j = ${#runs[@]} - 1; i < j; ++i, --j)); do
      tmp=${runs[i]}; runs[i]=${runs[j]}; runs[j]=$tmp
    done
  fi
  for entry in "${runs[@]}"; do
    read -r np label <<<"$entry"
    echo "bench/fsdp: round $((round + 1))/$rounds: $label, $np ranks" >&2
    if [[ $label == torch_* ]]; then
      port=$("$venv_python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
      program=(-x MASTER_ADDR=127.0.0.1 -x MASTER_PORT="$port" -x GLOO_SOCKET_IFNAME=lo
               "$venv_python" "$here/torch_peer.py" --strategy "${label#torch_}")
    else
      program=("$ours")
    fi
    # shellcheck disable=SC2046,SC2086  # word lists on purpose
    if ! mpirun "${flags[@]}" -np "$np" "${program[@]}" --label "$label" --csv "$raw" \
           --warmup "$warmup" --iters "$iters" ${FSDP_MODEL_ARGS:-} $(overrides_of "$label"); then
      echo "bench/fsdp: $label at $np ranks FAILED" >&2
      failed=1
    fi
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

[ -s "$raw" ] || { echo "bench/fsdp: no run succeeded" >&2; exit 1; }
"$python" "$here/summarize.py" "$raw" "$out/fsdp.csv" \
  --note "$rounds round(s) x $iters timed steps (+$warmup warmup), $(nproc) cores, $((SECONDS - start)) s, load average $load_before before, $load_after after"
exit "$failed"
