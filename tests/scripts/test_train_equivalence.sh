# ctest: timeout 600
# DDP equivalence on the bundled models through `mpiaccel train`: N ranks with
# per-rank batch B/N reproduce the single-process run with batch B (the
# sampler hands out the same global samples per step at every world size).
# Losses of 10 steps agree within 1e-5 relative; final parameters within 1e-5
# (mpiaccel ckpt diff --atol). Covers the GPT and the Fashion-MNIST MLP, many
# small buckets, one huge bucket, and gradient accumulation.
source "$(dirname "$0")/lib.sh" "$1"

GPT=(--config "$SOURCE_DIR/jobs/fortunes-gpt.ini" train.seq_len=32 model.n_layer=2 model.n_embd=64)
MLP=(--config "$SOURCE_DIR/jobs/fashion-mnist-cnn.ini" train.model=mlp model.hidden_size=64)
COMMON=(train.max_steps=10 train.eval_every=0 train.log_every=1 train.sample_tokens=0
        logging.progress=off scheduler.name=constant scheduler.warmup_steps=3 checkpoint.save_at_end=true)

run() {  # run NAME NP BATCH MODEL-ARGS... -- EXTRA...
  local name=$1 np=$2 batch=$3; shift 3
  mpi "$np" "$MPIACCEL" train "$@" "${COMMON[@]}" train.batch_size="$batch" \
    logging.metrics_file="$name.jsonl" checkpoint.dir="$name.ckpt" > "$name.out" 2>&1 \
    || { cat "$name.out"; fail "run $name"; }
}

run gpt_np1 1 12 "${GPT[@]}"
for np in 2 3 4; do
  run gpt_np$np $np $((12 / np)) "${GPT[@]}"
  compare_runs gpt_np1 gpt_np$np 1 10 1e-5
done
run gpt_np3_small_buckets 3 4 "${GPT[@]}" ddp.bucket_cap_mb=0.01
compare_runs gpt_np1 gpt_np3_small_buckets 1 10 1e-5
run gpt_np2_one_bucket 2 6 "${GPT[@]}" ddp.bucket_cap_mb=1000
compare_runs gpt_np1 gpt_np2_one_bucket 1 10 1e-5
run gpt_np2_accumulate 2 3 "${GPT[@]}" train.grad_accum_steps=2
compare_runs gpt_np1 gpt_np2_accumulate 1 10 1e-5
run gpt_np2_copied_grads 2 6 "${GPT[@]}" ddp.gradient_as_bucket_view=false
compare_runs gpt_np1 gpt_np2_copied_grads 1 10 1e-5

run mlp_np1 1 12 "${MLP[@]}"
for np in 3 4; do
  run mlp_np$np $np $((12 / np)) "${MLP[@]}"
  compare_runs mlp_np1 mlp_np$np 1 10 1e-5
done
echo PASS
