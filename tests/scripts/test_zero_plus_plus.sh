# ctest: timeout 600
# ZeRO++ ([fsdp] / [zero] quantized_weights, quantized_gradients,
# secondary_partition_size; docs/fsdp.md "ZeRO++") through `mpiaccel train`
# on the bundled GPT (2 layers, width 128), the same global batch of 48 in
# every run:
# - over 300 steps each quantized part ends within 2 % of unquantized FSDP's
#   validation loss (np 4): qwZ (int8 weight all-gathers, at np 3: uneven
#   shards), qgZ (int8 gradient all-to-all), and all three together in
#   ZeRO-3 configured by DeepSpeed's own keys (zero_quantized_weights,
#   zero_quantized_gradients, zero_hpz_partition_size);
# - hpZ alone changes no value: 20 steps with groups of 2 equal plain FSDP
#   bit for bit, losses and parameters, and the trace shows every backward
#   gather of a unit made within the group;
# - a resume across a checkpoint with all three on equals the uninterrupted
#   run bit for bit (the master shards are exact; checkpoints gather exactly);
# - ZeRO++ outside stage 3, a group that does not divide the ranks, and hpZ
#   without resharding are one-line errors.
source "$(dirname "$0")/lib.sh" "$1"

GPT=(--config "$SOURCE_DIR/jobs/fortunes-gpt.ini" model.n_layer=2)
COMMON=(train.log_every=10 train.sample_tokens=0 logging.progress=off train.eval_batches=20
        checkpoint.save_at_end=true distributed.strategy=fsdp)
LONG=(train.max_steps=300 train.eval_every=300)

train_run fsdp 4 12 GPT "${LONG[@]}"
train_run qwz 3 16 GPT "${LONG[@]}" fsdp.quantized_weights=true
expect_contains qwz.out "parameters all-gathered in int8 with a scale per 256 values (ZeRO++ qwZ)"
train_run qgz 4 12 GPT "${LONG[@]}" fsdp.quantized_gradients=true
expect_contains qgz.out "gradients reduce-scattered in int8 with a scale per 256 values, by all-to-all (ZeRO++ qgZ)"
cat > ds.json <<'JSON'
{"zero_optimization": {"stage": 3, "zero_quantized_weights": true, "zero_quantized_gradients": true,
                       "zero_hpz_partition_size": 2}}
JSON
train_run zero3 4 12 GPT "${LONG[@]}" --config ds.json distributed.strategy=zero
expect_contains zero3.out "strategy zero3 on 4 rank(s)"
expect_contains zero3.out "zero3: backward gathers within groups of 2 ranks from a second shard kept in forward (ZeRO++ hpZ)"
expect_val_loss_within fsdp qwz 0.02
expect_val_loss_within fsdp qgz 0.02
expect_val_loss_within fsdp zero3 0.02

# hpZ alone: backward gathers the very values forward did.
SHORT=(train.max_steps=20 train.eval_every=1000 train.log_every=1)
train_run plain20 4 12 GPT "${SHORT[@]}"
train_run hpz20 4 12 GPT "${SHORT[@]}" fsdp.secondary_partition_size=2 logging.trace=hpz.json
compare_runs plain20 hpz20 1 20 0
expect_backward_gathers_in_group hpz.json 4

ALL=(fsdp.quantized_weights=true fsdp.quantized_gradients=true fsdp.secondary_partition_size=0)
expect_exact_resume GPT train.eval_every=1000 "${ALL[@]}"

expect_train_error 2 "[zero] quantized_gradients (ZeRO++ qgZ) works on stage 3's sharded parameters; stage 2 shards none" \
  distributed.strategy=zero zero.stage=2 zero.quantized_gradients=true
expect_train_error 2 "[zero] quantized_weights (ZeRO++ qwZ) works on stage 3's sharded parameters; stage 2 shards none" \
  distributed.strategy=zero zero.stage=2 zero.quantized_weights=true
expect_train_error 4 "secondary_partition_size = 3 (ZeRO++ hpZ) does not divide the 4 ranks" fsdp.secondary_partition_size=3
expect_train_error 2 "it needs sharding_strategy = FULL_SHARD and reshard_after_forward = true" \
  fsdp.secondary_partition_size=2 fsdp.sharding_strategy=SHARD_GRAD_OP
echo PASS
