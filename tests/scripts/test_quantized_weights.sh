# ctest: timeout 600
# ZeRO++'s quantized weight all-gather (qwZ: [fsdp] / [zero]
# quantized_weights, docs/fsdp.md) through `mpiaccel train` on the bundled
# GPT (2 layers, width 128):
# - FSDP with int8 all-gathers ends 300 steps within 2 % of FSDP's validation
#   loss at np 2; so does ZeRO-3 configured by a DeepSpeed JSON with
#   zero_quantized_weights (DeepSpeed's key) against plain ZeRO-3, at np 3
#   (uneven shards);
# - a resume across a checkpoint equals the uninterrupted run bit for bit
#   (the master shards are exact; checkpoints gather without quantizing);
# - quantized_weights outside stage 3 is a one-line error.
source "$(dirname "$0")/lib.sh" "$1"

GPT=(--config "$SOURCE_DIR/jobs/fortunes-gpt.ini" model.n_layer=2)
COMMON=(train.log_every=10 train.sample_tokens=0 logging.progress=off train.eval_batches=20
        checkpoint.save_at_end=true)
LONG=(train.max_steps=300 train.eval_every=300)

train_run fsdp 2 16 GPT "${LONG[@]}" distributed.strategy=fsdp
train_run qwz 2 16 GPT "${LONG[@]}" distributed.strategy=fsdp fsdp.quantized_weights=true
expect_contains qwz.out "parameters all-gathered in int8 with a scale per 256 values (ZeRO++ qwZ)"
cat > ds.json <<'JSON'
{"zero_optimization": {"stage": 3, "zero_quantized_weights": true}}
JSON
mpi 3 "$MPIACCEL" train "${GPT[@]}" "${COMMON[@]}" "${LONG[@]}" --config ds.json distributed.strategy=zero train.batch_size=16 \
  logging.metrics_file=zero3.jsonl checkpoint.dir=zero3.ckpt > zero3.out 2>&1 || { cat zero3.out; fail "ZeRO-3 with qwZ"; }
expect_contains zero3.out "zero3: parameters all-gathered in int8"
train_run zero3_plain 3 16 GPT "${LONG[@]}" distributed.strategy=zero zero.stage=3
expect_val_loss_within fsdp qwz 0.02
expect_val_loss_within zero3_plain zero3 0.02

# Resume: 20 steps straight, against 10 + 10 across a checkpoint.
SHORT=(train.eval_every=1000 distributed.strategy=fsdp fsdp.quantized_weights=true)
expect_exact_resume GPT "${SHORT[@]}"

expect_train_error 2 "quantizes stage 3's parameter all-gathers; stage 2" distributed.strategy=zero zero.stage=2 \
  zero.quantized_weights=true
expect_contains zero3.out "strategy zero3 on 3 rank(s)"
echo PASS
