# ctest: timeout 600; labels gpu
# Pipeline parallelism on CUDA tensors reproduces the CPU run, through
# `mpiaccel train` (label gpu: `make test` leaves it out; bench/gpu/run.sh's
# `ctest -L gpu` runs it on a GPU machine, where it fails rather than skips
# without a GPU). pp 2 at np 2 on one GPU passes activations and gradients by
# MPI with host staging (NCCL refuses two ranks on one GPU; with one GPU per
# rank the same messages are ncclSend/ncclRecv): the GPT (its tied embedding
# summed over the two stages) and the Llama, under 1f1b and zb_h1, and pp 2 ×
# tp 2 at np 4, against one CPU process, every loss of 10 steps within 1e-4
# relative and parameters within 1e-4 (AdamW's eps 1e-5, as in
# test_gpu_train.sh); a pp 2 checkpoint of CUDA tensors resumes at np 1 on the
# GPU and continues as the CPU run does.
source "$(dirname "$0")/lib.sh" "$1"

GPT=(--config "$SOURCE_DIR/jobs/fortunes-gpt.ini" train.seq_len=32 model.n_layer=2 model.n_embd=64 optimizer.eps=1e-5)
LLAMA=("${GPT[@]}" train.model=llama model.n_kv_head=2 model.intermediate_size=96)
COMMON=(train.eval_every=5 train.eval_batches=2 train.log_every=1 train.sample_tokens=0 logging.progress=off
        scheduler.name=constant scheduler.warmup_steps=3 checkpoint.save_at_end=true)
GPU=(distributed.device=cuda distributed.allow_gpu_sharing=true)
PP=(parallelism.pp_size=2 parallelism.pp_microbatches=4)

run() {  # run NAME NP STEPS MODEL-ARRAY-NAME ARGS...
  local name=$1 np=$2 steps=$3 model="$4[@]"; shift 4
  mpi "$np" "$MPIACCEL" train "${!model}" "${COMMON[@]}" train.batch_size=12 train.max_steps="$steps" \
    logging.metrics_file="$name.jsonl" checkpoint.dir="$name.ckpt" "$@" > "$name.out" 2>&1 \
    || { cat "$name.out"; fail "run $name"; }
}

for m in GPT LLAMA; do
  run ${m}_cpu 1 10 $m distributed.device=cpu
  for schedule in 1f1b zb_h1; do
    run ${m}_pp2_$schedule 2 10 $m "${GPU[@]}" "${PP[@]}" parallelism.pp_schedule=$schedule
    expect_contains ${m}_pp2_$schedule.out "rank(s) (cuda:0, mpi)"
    compare_runs ${m}_cpu ${m}_pp2_$schedule 1 10 1e-4
  done
done
run LLAMA_pp2_tp2 4 10 LLAMA "${GPU[@]}" "${PP[@]}" parallelism.tp_size=2
compare_runs LLAMA_cpu LLAMA_pp2_tp2 1 10 1e-4

run GPT_cpu12 1 12 GPT distributed.device=cpu
run resumed 1 12 GPT "${GPU[@]}" checkpoint.resume="$WORK/GPT_pp2_1f1b.ckpt/step_00000010.h5"
compare_runs GPT_cpu12 resumed 11 12 1e-4
echo PASS
