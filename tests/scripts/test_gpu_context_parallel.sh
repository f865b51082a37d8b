# ctest: timeout 600; labels gpu
# Context parallelism on CUDA tensors reproduces the CPU run, through
# `mpiaccel train` (label gpu: `make test` leaves it out; bench/gpu/run.sh's
# `ctest -L gpu` runs it on a GPU machine, where it fails rather than skips
# without a GPU). cp 2 at np 2 on one GPU: ring attention's key/value blocks
# and their gradients go by MPI with host staging, the all-to-all likewise
# (NCCL refuses two ranks on one GPU; with one GPU per rank they are
# ncclSend/ncclRecv, and a grouped send/recv per peer); each block's
# attention runs the explicit product with its log-sum-exp (the fused kernel
# with one is the CPU's). The GPT and the Llama at seq 256, ring and
# alltoall, and cp 2 × tp 2 at np 4, against one CPU process, every loss of
# 10 steps within 1e-4 relative and parameters within 1e-4.
source "$(dirname "$0")/lib.sh" "$1"

GPT=(--config "$SOURCE_DIR/jobs/fortunes-gpt.ini" train.seq_len=256 model.n_layer=2 model.n_head=4 model.n_embd=64
     optimizer.eps=1e-5)
LLAMA=("${GPT[@]}" train.model=llama model.n_kv_head=2 model.intermediate_size=96)
COMMON=(train.eval_every=5 train.eval_batches=2 train.log_every=1 train.sample_tokens=0 logging.progress=off
        scheduler.name=constant scheduler.warmup_steps=3 checkpoint.save_at_end=true train.max_steps=10)
GPU=(distributed.device=cuda distributed.allow_gpu_sharing=true)

run() {  # run NAME NP MODEL-ARRAY-NAME ARGS...
  local name=$1 np=$2 model="$3[@]"; shift 3
  mpi "$np" "$MPIACCEL" train "${!model}" "${COMMON[@]}" train.batch_size=4 \
    logging.metrics_file="$name.jsonl" checkpoint.dir="$name.ckpt" "$@" > "$name.out" 2>&1 \
    || { cat "$name.out"; fail "run $name"; }
}

for m in GPT LLAMA; do
  run ${m}_cpu 1 $m distributed.device=cpu
  for exchange in ring alltoall; do
    run ${m}_cp2_$exchange 2 $m "${GPU[@]}" parallelism.cp_size=2 parallelism.cp_comm_strategy=$exchange
    expect_contains ${m}_cp2_$exchange.out "rank(s) (cuda:0, mpi)"
    compare_runs ${m}_cpu ${m}_cp2_$exchange 1 10 1e-4
  done
done
run LLAMA_cp2_tp2 4 LLAMA "${GPU[@]}" parallelism.cp_size=2 parallelism.tp_size=2
compare_runs LLAMA_cpu LLAMA_cp2_tp2 1 10 1e-4
echo PASS
