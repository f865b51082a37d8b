# ctest: timeout 1500
# Tensor parallelism through `mpiaccel train`, in the shared equivalence
# harness (compare_runs: losses of 10 steps within 1e-5 relative, final
# checkpoints within 5e-5 absolute; see TOL below): every mesh of world size 2 and 4 reproduces the
# single-process run, for the GPT (fused q, k, v split by heads, tied
# vocabulary-parallel head) and the Llama (grouped-query attention; at tp 4 its
# 2 key/value heads are each held by 2 ranks):
#   tp2 (np 2), tp2 × dp_shard2 under fsdp, tp2 × dp_replicate2 under ddp,
#   tp4, tp2 × zero-1 and zero-2, fsdp with activation checkpointing and
#   gradient accumulation, bf16 against np 1's bf16; and with sequence
#   parallelism: tp2, tp2 × dp_shard2, tp4, tp2 under ddp with activation
#   checkpointing (its recomputation replays the collectives and each rank's
#   dropout stream) and accumulation.
# Clipping is active (grad_clip 0.3): the norm counts every parameter once.
# Checkpoints cross meshes: a tp2 × dp_shard2 checkpoint of step 5 resumes at
# tp4 and under DDP at np 3 (tp 1), a DDP np 3 checkpoint resumes at tp2 ×
# dp_shard2; each continues as the uninterrupted run. With dropout, each
# rank's stream is replayed by activation checkpointing and kept by a
# checkpoint (a resume in the same mesh is bit-exact). `mpiaccel generate` at
# tp 2 samples the tokens np 1 samples and writes np 1's logits, `ckpt export
# --format hf` of a tp checkpoint equals the np 1 one's within 1e-5, and
# estimate-memory counts what a split rank holds. Wrong meshes are one line.
source "$(dirname "$0")/lib.sh" "$1"

GPT=(--config "$SOURCE_DIR/jobs/fortunes-gpt.ini" train.seq_len=32 model.n_layer=2 model.n_head=4 model.n_embd=64)
LLAMA=("${GPT[@]}" train.model=llama model.n_kv_head=2 model.intermediate_size=96)
COMMON=(train.max_steps=10 train.eval_every=0 train.log_every=1 train.sample_tokens=0 optimizer.grad_clip=0.3
        logging.progress=off scheduler.name=constant scheduler.warmup_steps=3 checkpoint.save_at_end=true)
FSDP=(distributed.strategy=fsdp fsdp.auto_wrap_policy=TRANSFORMER_BASED_WRAP)

# A split model computes with other matrix shapes, so its float rounding
# differs from np 1's (gradients agree to about 3e-7 relative: measured after
# one step), and AdamW moves an element whose gradient is near zero by a
# whole learning rate in the direction of that rounding: after 10 steps
# parameters differ by up to about 1.2e-5 while the losses agree to 2e-7.
TOL=(1e-5 5e-5)

for m in GPT LLAMA; do
  train_run ${m}_np1 1 12 $m
  train_run ${m}_tp2 2 12 $m parallelism.tp_size=2
  expect_contains ${m}_tp2.out "mesh dp_replicate 1 × dp_shard 1 × tp 2 (2 ranks)"
  compare_runs ${m}_np1 ${m}_tp2 1 10 "${TOL[@]}"
  train_run ${m}_tp2_shard2 4 6 $m parallelism.tp_size=2 "${FSDP[@]}"
  compare_runs ${m}_np1 ${m}_tp2_shard2 1 10 "${TOL[@]}"
  train_run ${m}_tp2_replicate2 4 6 $m parallelism.tp_size=2 parallelism.dp_replicate_size=2
  compare_runs ${m}_np1 ${m}_tp2_replicate2 1 10 "${TOL[@]}"
  train_run ${m}_tp4 4 12 $m parallelism.tp_size=4
  compare_runs ${m}_np1 ${m}_tp4 1 10 "${TOL[@]}"
done

# Sequence parallelism: norms and dropout on sequence shards.
train_run GPT_tp2_sp 2 12 GPT parallelism.tp_size=2 parallelism.sequence_parallel=true
compare_runs GPT_np1 GPT_tp2_sp 1 10 "${TOL[@]}"
train_run GPT_tp2_shard2_sp 4 6 GPT parallelism.tp_size=2 parallelism.sequence_parallel=true "${FSDP[@]}"
compare_runs GPT_np1 GPT_tp2_shard2_sp 1 10 "${TOL[@]}"
train_run LLAMA_tp4_sp 4 12 LLAMA parallelism.tp_size=4 parallelism.sequence_parallel=true
compare_runs LLAMA_np1 LLAMA_tp4_sp 1 10 "${TOL[@]}"
train_run LLAMA_tp2_sp_recompute 2 6 LLAMA parallelism.tp_size=2 parallelism.sequence_parallel=true \
  fsdp.activation_checkpointing=true train.grad_accum_steps=2
compare_runs LLAMA_np1 LLAMA_tp2_sp_recompute 1 10 "${TOL[@]}"

# Dropout: each rank's heads and sequence shard draw from its own stream,
# which activation checkpointing replays: the recomputing run equals the
# storing one.
train_run GPT_drop 4 6 GPT model.dropout=0.1 parallelism.tp_size=2 parallelism.sequence_parallel=true "${FSDP[@]}"
train_run GPT_drop_recompute 4 6 GPT model.dropout=0.1 parallelism.tp_size=2 parallelism.sequence_parallel=true \
  "${FSDP[@]}" fsdp.activation_checkpointing=true
compare_runs GPT_drop GPT_drop_recompute 1 10 1e-6 1e-6
# ... and which a checkpoint keeps: stopped at step 5 and resumed in the same
# mesh, the run is the uninterrupted one, bit for bit.
train_run GPT_drop_resumed 4 6 GPT model.dropout=0.1 parallelism.tp_size=2 parallelism.sequence_parallel=true \
  "${FSDP[@]}" train.max_steps=5
mpi 4 "$MPIACCEL" train "${GPT[@]}" "${COMMON[@]}" train.batch_size=6 model.dropout=0.1 parallelism.tp_size=2 \
  parallelism.sequence_parallel=true "${FSDP[@]}" checkpoint.resume=latest logging.metrics_file=GPT_drop_resumed.jsonl \
  checkpoint.dir=GPT_drop_resumed.ckpt > GPT_drop_resumed.out 2>&1 || { cat GPT_drop_resumed.out; fail "resume with dropout"; }
compare_runs GPT_drop GPT_drop_resumed 1 10 0 0

for stage in 1 2; do
  train_run GPT_tp2_zero$stage 4 6 GPT parallelism.tp_size=2 distributed.strategy=zero zero.stage=$stage
  compare_runs GPT_np1 GPT_tp2_zero$stage 1 10 "${TOL[@]}"
done
train_run LLAMA_tp2_recompute 4 3 LLAMA parallelism.tp_size=2 "${FSDP[@]}" fsdp.activation_checkpointing=true \
  train.grad_accum_steps=2
compare_runs LLAMA_np1 LLAMA_tp2_recompute 1 10 "${TOL[@]}"
train_run GPT_np1_bf16 1 12 GPT distributed.mixed_precision=bf16
train_run GPT_tp2_bf16 2 12 GPT distributed.mixed_precision=bf16 parallelism.tp_size=2
compare_runs GPT_np1_bf16 GPT_tp2_bf16 1 10 2e-2

# Checkpoints across meshes: stop at step 5, go on elsewhere to step 10.
train_run GPT_half 4 6 GPT parallelism.tp_size=2 "${FSDP[@]}" train.max_steps=5
resume() {  # resume NAME FROM NP BATCH EXTRA...
  local name=$1 from=$2 np=$3 batch=$4; shift 4
  cp -r "$from.ckpt" "$name.ckpt"
  cp "$from.jsonl" "$name.jsonl"
  mpi "$np" "$MPIACCEL" train "${GPT[@]}" "${COMMON[@]}" train.batch_size="$batch" checkpoint.resume=latest "$@" \
    logging.metrics_file="$name.jsonl" checkpoint.dir="$name.ckpt" > "$name.out" 2>&1 \
    || { cat "$name.out"; fail "resume $name"; }
  expect_contains "$name.out" "resumed from"
  compare_runs GPT_np1 "$name" 1 10 "${TOL[@]}"
}
resume GPT_to_tp4 GPT_half 4 12 parallelism.tp_size=4
resume GPT_to_ddp3 GPT_half 3 4
train_run GPT_ddp3_half 3 4 GPT train.max_steps=5
resume GPT_ddp3_to_tp2 GPT_ddp3_half 4 6 parallelism.tp_size=2 "${FSDP[@]}"

# Generation from a checkpoint, split over 2 ranks: np 1's tokens.
"$MPIACCEL" generate --checkpoint GPT_np1.ckpt --prompt "The " --max-new 40 --ids > gen_np1.txt 2> gen_np1.err \
  || { cat gen_np1.txt gen_np1.err; fail "generate at np 1"; }
mpi 2 "$MPIACCEL" generate --checkpoint GPT_np1.ckpt --prompt "The " --max-new 40 --ids parallelism.tp_size=2 \
  > gen_tp2.txt 2> gen_tp2.err || { cat gen_tp2.txt gen_tp2.err; fail "generate at tp 2"; }
[ "$(tail -1 gen_np1.txt)" = "$(tail -1 gen_tp2.txt)" ] || fail "tp 2 sampled other tokens than np 1"
# --logits writes the whole vocabulary's logits, split or not (a prompt of 5 bytes: not a multiple of tp).
"$MPIACCEL" generate --checkpoint GPT_np1.ckpt --prompt "Hello" --max-new 1 --logits np1.npy > /dev/null 2>&1 \
  || fail "generate --logits at np 1"
mpi 2 "$MPIACCEL" generate --checkpoint GPT_np1.ckpt --prompt "Hello" --max-new 1 --logits tp2.npy \
  parallelism.tp_size=2 parallelism.sequence_parallel=true > gen_logits.out 2>&1 \
  || { cat gen_logits.out; fail "generate --logits at tp 2"; }
"$SOURCE_DIR/.venv/bin/python" -c '
import numpy as np
a, b = np.load("np1.npy"), np.load("tp2.npy")
assert a.shape == b.shape == (5, 256), (a.shape, b.shape)
d = float(abs(a - b).max()); print(f"logits at tp 2: max |diff| {d:.2e}"); assert d < 1e-4
' || fail "the logits at tp 2 differ from np 1"

# A tp checkpoint exports whole tensors.
for r in LLAMA_np1 LLAMA_tp2_shard2; do
  "$MPIACCEL" ckpt export "$r.ckpt" --format hf -o "$r.hf" > "$r.export" 2>&1 || { cat "$r.export"; fail "export $r"; }
done
"$SOURCE_DIR/.venv/bin/python" - LLAMA_np1.hf LLAMA_tp2_shard2.hf <<'PY' || fail "the tp export differs from np 1's"
import sys
from safetensors.numpy import load_file
a, b = (load_file(d + "/model.safetensors") for d in sys.argv[1:3])
assert a.keys() == b.keys(), (sorted(a), sorted(b))
worst = max(float(abs(a[k] - b[k]).max()) for k in a)
print(f"export: {len(a)} tensors, worst difference {worst:.2e}")
assert worst <= 1e-5
PY

# estimate-memory of a mesh: one rank's slices, as the split model counts them.
"$MPIACCEL" estimate-memory --json --world 4 "${LLAMA[@]}" parallelism.tp_size=2 > estimate.json 2>&1 \
  || { cat estimate.json; fail "estimate-memory at tp 2"; }
params=$(sed -nE 's/.*"params": *([0-9]+).*/\1/p' estimate.json | head -1)
expect_contains LLAMA_tp2_shard2.out "mpiaccel train: llama ($params parameters)"
expect_contains estimate.json '"tp_size": 2'

# Wrong meshes: one line with the numbers.
bad() {  # bad NP EXPECTED EXTRA...
  local np=$1 expected=$2; shift 2
  if mpi "$np" "$MPIACCEL" train "${GPT[@]}" "${COMMON[@]}" train.max_steps=1 "$@" > bad.out 2>&1; then
    fail "accepted: $*"
  fi
  expect_contains bad.out "$expected"
}
bad 4 "[parallelism] tp_size 3 does not divide the 4 ranks" parallelism.tp_size=3
bad 4 "[model] n_head 6 does not divide by [parallelism] tp_size 4" parallelism.tp_size=4 model.n_head=6 model.n_embd=96
bad 2 "[model] vocab_size 257 does not divide by [parallelism] tp_size 2" parallelism.tp_size=2 model.vocab_size=257
bad 4 "make [train] seq_len a multiple of tp_size" parallelism.tp_size=4 parallelism.sequence_parallel=true \
  train.seq_len=30
bad 4 "[model] n_kv_head 3 and [parallelism] tp_size 4" parallelism.tp_size=4 train.model=llama model.n_head=12 \
  model.n_kv_head=3 model.n_embd=96
echo PASS
