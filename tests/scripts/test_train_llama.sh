# ctest: timeout 900
# The Llama under every strategy through `mpiaccel train`: N ranks with
# per-rank batch B/N reproduce the single-process run with batch B, losses of
# 10 steps within 1e-5 relative and final parameters within 1e-5 (as
# test_train_equivalence.sh does for the GPT): DDP at np 2, FSDP with its
# LlamaDecoderLayer units at np 3 (uneven shards), with activation
# checkpointing and gradient accumulation at np 2, ZeRO-1, -2 and -3 at np 2,
# HSDP at np 4. bf16 runs and ends near fp32's loss. Then the end-of-run
# sample and `mpiaccel generate` through the KV cache, equal at np 1 and
# under FSDP at np 2, and estimate-memory's parameter count equal to the
# model's.
source "$(dirname "$0")/lib.sh" "$1"

LLAMA=(--config "$SOURCE_DIR/jobs/fortunes-gpt.ini" train.model=llama train.seq_len=32 model.n_layer=2
       model.n_head=4 model.n_kv_head=2 model.n_embd=64 model.intermediate_size=96)
COMMON=(train.max_steps=10 train.eval_every=0 train.log_every=1 train.sample_tokens=0
        logging.progress=off scheduler.name=constant scheduler.warmup_steps=3 checkpoint.save_at_end=true)
UNITS=(fsdp.auto_wrap_policy=TRANSFORMER_BASED_WRAP fsdp.transformer_layer_cls_to_wrap=LlamaDecoderLayer)

run() {  # run NAME NP BATCH EXTRA...
  local name=$1 np=$2 batch=$3; shift 3
  mpi "$np" "$MPIACCEL" train "${LLAMA[@]}" "${COMMON[@]}" train.batch_size="$batch" "$@" \
    logging.metrics_file="$name.jsonl" checkpoint.dir="$name.ckpt" > "$name.out" 2>&1 \
    || { cat "$name.out"; fail "run $name"; }
}

run np1 1 12
run ddp_np2 2 6
compare_runs np1 ddp_np2 1 10 1e-5
run fsdp_np3 3 4 distributed.strategy=fsdp "${UNITS[@]}"
compare_runs np1 fsdp_np3 1 10 1e-5
run fsdp_ckpt_accum 2 3 distributed.strategy=fsdp "${UNITS[@]}" fsdp.activation_checkpointing=true \
  train.grad_accum_steps=2
compare_runs np1 fsdp_ckpt_accum 1 10 1e-5
for stage in 1 2 3; do
  run zero${stage}_np2 2 6 distributed.strategy=zero zero.stage=$stage
  compare_runs np1 zero${stage}_np2 1 10 1e-5
done
run hsdp_np4 4 3 distributed.strategy=fsdp "${UNITS[@]}" fsdp.sharding_strategy=HYBRID_SHARD \
  fsdp.hybrid_group_size=2
compare_runs np1 hsdp_np4 1 10 1e-5

run bf16_np2 2 6 distributed.mixed_precision=bf16 distributed.strategy=fsdp "${UNITS[@]}"
/usr/bin/python3 - np1.jsonl bf16_np2.jsonl <<'PY' || fail "bf16 training strays from fp32"
import json, sys
last = lambda p: [r["loss"] for r in map(json.loads, open(p)) if "loss" in r][-1]
a, b = last(sys.argv[1]), last(sys.argv[2])
print(f"step 10 loss: fp32 {a:.4f}, bf16 {b:.4f}")
assert abs(a - b) / a < 0.02
PY

# Sampling through the KV cache, at the end of a run and from a checkpoint.
run sample_np2 2 6 train.sample_tokens=40
expect_contains sample_np2.out "sample:"
"$MPIACCEL" generate --checkpoint np1.ckpt --prompt "The " --max-new 40 --ids > gen_np1.txt 2> gen_np1.err \
  || { cat gen_np1.txt gen_np1.err; fail "generate at np 1"; }
mpi 2 "$MPIACCEL" generate --checkpoint np1.ckpt --prompt "The " --max-new 40 --ids distributed.strategy=fsdp \
  "${UNITS[@]}" > gen_fsdp.txt 2> gen_fsdp.err || { cat gen_fsdp.txt gen_fsdp.err; fail "generate under FSDP at np 2"; }
[ "$(tail -1 gen_np1.txt)" = "$(tail -1 gen_fsdp.txt)" ] || fail "FSDP at np 2 sampled other tokens"

"$MPIACCEL" estimate-memory --json --world 2 "${LLAMA[@]}" > estimate.json 2>&1 || { cat estimate.json; fail "estimate"; }
params=$(sed -nE 's/.*"params": *([0-9]+).*/\1/p' estimate.json | head -1)
expect_contains np1.out "mpiaccel train: llama ($params parameters)"
echo PASS
