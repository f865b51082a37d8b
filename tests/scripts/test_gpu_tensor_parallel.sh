# ctest: timeout 600; labels gpu
# Tensor parallelism on CUDA tensors reproduces the CPU run, through
# `mpiaccel train` (label gpu: `make test` leaves it out; bench/gpu/run.sh's
# `ctest -L gpu` runs it on a GPU machine, where it fails rather than skips
# without a GPU). tp 2 at np 2 on one GPU goes through MPI with host staging
# (NCCL refuses two ranks on one GPU; with one GPU per rank the same
# collectives go over NCCL): the GPT and the Llama, with and without sequence
# parallelism, against one CPU process, every loss of 10 steps within 1e-4
# relative and parameters within 1e-4 (AdamW's eps 1e-5, as in
# test_gpu_train.sh); a tp 2 checkpoint of CUDA tensors resumes at np 1 on
# the GPU and continues as the CPU run does.
source "$(dirname "$0")/lib.sh" "$1"

GPT=(--config "$SOURCE_DIR/jobs/fortunes-gpt.ini" train.seq_len=32 model.n_layer=2 model.n_embd=64 optimizer.eps=1e-5)
LLAMA=("${GPT[@]}" train.model=llama model.n_kv_head=2 model.intermediate_size=96)
COMMON=(train.eval_every=0 train.log_every=1 train.sample_tokens=0 logging.progress=off
        scheduler.name=constant scheduler.warmup_steps=3 checkpoint.save_at_end=true)
GPU=(distributed.device=cuda distributed.allow_gpu_sharing=true)

run() {  # run NAME NP STEPS MODEL-ARRAY-NAME ARGS...
  local name=$1 np=$2 steps=$3 model="$4[@]"; shift 4
  mpi "$np" "$MPIACCEL" train "${!model}" "${COMMON[@]}" train.batch_size=12 train.max_steps="$steps" \
    logging.metrics_file="$name.jsonl" checkpoint.dir="$name.ckpt" "$@" > "$name.out" 2>&1 \
    || { cat "$name.out"; fail "run $name"; }
}

for m in GPT LLAMA; do
  run ${m}_cpu 1 10 $m distributed.device=cpu
  for sp in false true; do
    run ${m}_tp2_$sp 2 10 $m "${GPU[@]}" parallelism.tp_size=2 parallelism.sequence_parallel=$sp
    expect_contains ${m}_tp2_$sp.out "rank(s) (cuda:0, mpi)"
    compare_runs ${m}_cpu ${m}_tp2_$sp 1 10 1e-4
  done
done

run GPT_cpu12 1 12 GPT distributed.device=cpu
run resumed 1 12 GPT "${GPU[@]}" checkpoint.resume="$WORK/GPT_tp2_true.ckpt/step_00000010.h5"
compare_runs GPT_cpu12 resumed 11 12 1e-4
echo PASS
