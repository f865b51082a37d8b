# ctest: timeout 1500
# Pipeline parallelism through `mpiaccel train`, in the shared equivalence
# harness (compare_runs: losses of 10 steps within 1e-5 relative, final
# checkpoints within 5e-5 absolute): the GPT (whose head is tied to the
# embedding: the first and last stages sum its gradient) and the Llama cut
# into 2 and 4 stages reproduce the single-process run under every schedule
# (gpipe, 1f1b, interleaved_1f1b with 2 stages per rank, zb_h1), and composed
# with data parallelism (pp2 × dp2 under ddp and zero 1-3, pp2 × dp_shard2 under fsdp)
# and tensor parallelism (pp2 × tp2; pp2 × dp_shard2 × tp2 at np 8). Clipping is active (grad_clip 0.3):
# the norm counts every parameter once, over all stages. The step's batch
# (12 sequences) is cut into microbatches (pp_microbatches) as np 1 runs it
# whole: the same mean loss. A pp2 × tp2 checkpoint holds the whole model
# and resumes under FSDP at np 3, as the uninterrupted run. Errors are one
# line.
source "$(dirname "$0")/lib.sh" "$1"

GPT=(--config "$SOURCE_DIR/jobs/fortunes-gpt.ini" train.seq_len=32 model.n_layer=4 model.n_head=4 model.n_embd=64)
LLAMA=("${GPT[@]}" train.model=llama model.n_kv_head=2 model.intermediate_size=96)
COMMON=(train.max_steps=10 train.eval_every=5 train.eval_batches=2 train.log_every=1 train.sample_tokens=0
        optimizer.grad_clip=0.3 logging.progress=off scheduler.name=constant scheduler.warmup_steps=3
        checkpoint.save_at_end=true)
FSDP=(distributed.strategy=fsdp fsdp.auto_wrap_policy=TRANSFORMER_BASED_WRAP)
# Stages compute what np 1 computes, in other matrix shapes only under tp
# (see test_tensor_parallel.sh for why parameters get the wider tolerance).
TOL=(1e-5 5e-5)

pp() {  # pp NAME NP BATCH MODEL PP SCHEDULE MICROBATCHES EXTRA...
  local name=$1 np=$2 batch=$3 model=$4 size=$5 schedule=$6 micro=$7; shift 7
  train_run "$name" "$np" "$batch" "$model" parallelism.pp_size="$size" parallelism.pp_schedule="$schedule" \
    parallelism.pp_microbatches="$micro" "$@"
}

for m in GPT LLAMA; do
  train_run ${m}_np1 1 12 $m
  for schedule in gpipe 1f1b interleaved_1f1b zb_h1; do
    pp ${m}_pp2_$schedule 2 12 $m 2 $schedule 4
    compare_runs ${m}_np1 ${m}_pp2_$schedule 1 10 "${TOL[@]}"
  done
  pp ${m}_pp4_1f1b 4 12 $m 4 1f1b 4
  compare_runs ${m}_np1 ${m}_pp4_1f1b 1 10 "${TOL[@]}"
done
expect_contains GPT_pp2_1f1b.out "mesh pp 2 × dp_replicate 1 × dp_shard 1 (2 ranks)"
expect_contains GPT_pp2_1f1b.out "pipeline rank 0 of 2: stage 0 (layers 0-1, the first piece) of 2, schedule 1f1b, 4 microbatches"
expect_contains GPT_pp2_interleaved_1f1b.out "stage 0 (layers 0-0, the first piece); stage 2 (layers 2-2) of 4"
pp GPT_pp4_zb_h1 4 12 GPT 4 zb_h1 6
compare_runs GPT_np1 GPT_pp4_zb_h1 1 10 "${TOL[@]}"
pp GPT_pp4_gpipe 4 12 GPT 4 gpipe 3 parallelism.pp_layers=0-0,1-1,2-2,3-3
compare_runs GPT_np1 GPT_pp4_gpipe 1 10 "${TOL[@]}"

# With data parallelism: each stage's strategy runs over its data-parallel ranks.
pp GPT_pp2_ddp2 4 6 GPT 2 1f1b 2
compare_runs GPT_np1 GPT_pp2_ddp2 1 10 "${TOL[@]}"
pp LLAMA_pp2_fsdp2 4 6 LLAMA 2 1f1b 2 "${FSDP[@]}"
compare_runs LLAMA_np1 LLAMA_pp2_fsdp2 1 10 "${TOL[@]}"
pp LLAMA_pp2_zb_ddp2_recompute 4 6 LLAMA 2 zb_h1 2 fsdp.activation_checkpointing=true
compare_runs LLAMA_np1 LLAMA_pp2_zb_ddp2_recompute 1 10 "${TOL[@]}"
# With tensor parallelism (3-D with the data-parallel size 1).
pp GPT_pp2_tp2 4 12 GPT 2 1f1b 4 parallelism.tp_size=2
expect_contains GPT_pp2_tp2.out "mesh pp 2 × dp_replicate 1 × dp_shard 1 × tp 2 (4 ranks)"
compare_runs GPT_np1 GPT_pp2_tp2 1 10 "${TOL[@]}"

# The 4-D mesh's three used dimensions at once: pp 2 × dp_shard 2 × tp 2 (np 8).
pp LLAMA_pp2_shard2_tp2 8 6 LLAMA 2 1f1b 2 parallelism.tp_size=2 "${FSDP[@]}"
expect_contains LLAMA_pp2_shard2_tp2.out "mesh pp 2 × dp_replicate 1 × dp_shard 2 × tp 2 (8 ranks)"
compare_runs LLAMA_np1 LLAMA_pp2_shard2_tp2 1 10 "${TOL[@]}"

# A pp2 × tp2 checkpoint of step 5 goes on under FSDP at np 3.
pp LLAMA_pp2_tp2_half 4 12 LLAMA 2 1f1b 4 parallelism.tp_size=2 train.max_steps=5
cp -r LLAMA_pp2_tp2_half.ckpt LLAMA_to_fsdp3.ckpt
cp LLAMA_pp2_tp2_half.jsonl LLAMA_to_fsdp3.jsonl
mpi 3 "$MPIACCEL" train "${LLAMA[@]}" "${COMMON[@]}" train.batch_size=4 "${FSDP[@]}" checkpoint.resume=latest \
  logging.metrics_file=LLAMA_to_fsdp3.jsonl checkpoint.dir=LLAMA_to_fsdp3.ckpt > LLAMA_to_fsdp3.out 2>&1 \
  || { cat LLAMA_to_fsdp3.out; fail "resume the pp2 × tp2 checkpoint under fsdp at np 3"; }
expect_contains LLAMA_to_fsdp3.out "resumed from"
compare_runs LLAMA_np1 LLAMA_to_fsdp3 1 10 "${TOL[@]}"

# A stage that stalls (stage 1, in step 3) ends the job within the deadline:
# stage 0's receive names the message it waited for, the peer and the step.
start=$(date +%s)
mpi 2 -x MPIACCEL_TEST_STALL=1:3:600 "$MPIACCEL" train "${GPT[@]}" "${COMMON[@]}" train.batch_size=4 \
  parallelism.pp_size=2 parallelism.pp_microbatches=2 distributed.timeout_s=5 checkpoint.save_at_end=false \
  checkpoint.dir=stall.ckpt > stall.out 2>&1 && fail "a stalled pipeline exited 0"
[ $(( $(date +%s) - start )) -le 40 ] || fail "a stalled pipeline took $(( $(date +%s) - start )) s to end"
# Stage 0's receive deadline (5 s after it posts) and stage 1's own watchdog
# (5 s after its last progress, checked every 1.25 s) race; the receive nearly
# always ends the job first, and either names what happened.
if grep -qF "watchdog: this rank made no progress" stall.out; then
  expect_contains stall.out "step 3: injected stall"
else
  expect_contains stall.out "recv of gradients of microbatch 0 from stage 1 (rank 1 of the pipeline) to stage 0"
  expect_contains stall.out "did not complete within 5 s"
  expect_contains stall.out "step 3"
fi

# With ZeRO: stage 1 (gradients and optimizer state partitioned over the
# stage's data-parallel ranks), and stages 2-3 for the untied Llama.
pp GPT_pp2_zero1 4 6 GPT 2 1f1b 2 distributed.strategy=zero zero.stage=1
compare_runs GPT_np1 GPT_pp2_zero1 1 10 "${TOL[@]}"
for stage in 2 3; do
  pp LLAMA_pp2_zero$stage 4 6 LLAMA 2 1f1b 2 distributed.strategy=zero zero.stage=$stage
  compare_runs LLAMA_np1 LLAMA_pp2_zero$stage 1 10 "${TOL[@]}"
done

# One-line errors.
expect_train_error 2 "[parallelism] pp_microbatches = 1 with pp_size 2: 1f1b and zb_h1 need at least pp_size microbatches" \
  parallelism.pp_size=2
expect_train_error 4 "pipeline parallelism: 4 stages (pp_size × pp_virtual_stages) but the model has 2 layers" \
  parallelism.pp_size=4 parallelism.pp_schedule=gpipe model.n_layer=2
expect_train_error 4 "the model ties a module of its first piece to its last" parallelism.pp_size=2 \
  parallelism.pp_microbatches=2 "${FSDP[@]}"
expect_train_error 4 "strategy zero shards its gradients; use strategy = ddp, or zero with zero.stage = 1" \
  parallelism.pp_size=2 parallelism.pp_microbatches=2 distributed.strategy=zero zero.stage=2
# A middle stage, which holds no tied module, refuses too (rather than wait for the others).
expect_train_error 3 "the model ties a module of its first piece to its last" parallelism.pp_size=3 \
  parallelism.pp_microbatches=3 model.n_layer=3 "${FSDP[@]}"
mpi 2 "$MPIACCEL" train --config "$SOURCE_DIR/jobs/fashion-mnist-cnn.ini" train.max_steps=1 parallelism.pp_size=2 \
  parallelism.pp_schedule=gpipe logging.progress=off > err.out 2>&1 && fail "a cnn cut into stages"
expect_contains err.out "[train] model = cnn does not declare pipeline pieces; use gpt or llama, or pp_size = 1"
# parallelize() refuses a mesh that asks for a split the model's plan lacks,
# naming the key, before any step: a cnn has no tensor or context split.
for split in tp cp; do
  mpi 2 "$MPIACCEL" train --config "$SOURCE_DIR/jobs/fashion-mnist-cnn.ini" train.max_steps=1 \
    parallelism.${split}_size=2 logging.progress=off > err.out 2>&1 && fail "a cnn split by $split"
  expect_contains err.out "[parallelism] ${split}_size 2: the model's plan has no"
  expect_contains err.out "; set ${split}_size = 1"
done
echo PASS
