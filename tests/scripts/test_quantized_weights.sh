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
/usr/bin/python3 - fsdp.jsonl:qwz.jsonl zero3_plain.jsonl:zero3.jsonl <<'PY' || fail "qwZ's loss is not within 2 % of the unquantized run's"
import json, sys
def val(p): return [r["val_loss"] for r in map(json.loads, open(p)) if "val_loss" in r][-1]
for pair in sys.argv[1:]:
    ref_path, path = pair.split(":")
    ref, got = val(ref_path), val(path)
    print(f"{path}: val_loss {got:.4f} against {ref_path}'s {ref:.4f} ({100 * (got - ref) / ref:+.2f} %)")
    assert abs(got - ref) <= 0.02 * ref
PY

# Resume: 20 steps straight, against 10 + 10 across a checkpoint.
SHORT=(train.eval_every=1000 distributed.strategy=fsdp fsdp.quantized_weights=true)
train_run straight 2 16 GPT train.max_steps=20 "${SHORT[@]}"
train_run halves 2 16 GPT train.max_steps=10 "${SHORT[@]}"
train_run halves 2 16 GPT train.max_steps=20 "${SHORT[@]}" checkpoint.resume=latest
expect_contains halves.out "resumed from"
/usr/bin/python3 - straight.jsonl halves.jsonl <<'PY' || fail "the resumed qwZ run differs"
import json, sys
def losses(p): return {r["step"]: r["loss"] for r in map(json.loads, open(p)) if "loss" in r}
a, b = losses(sys.argv[1]), losses(sys.argv[2])
assert 20 in a and a[20] == b[20], (a.get(20), b.get(20))
print("resumed qwZ run: step 20 loss", b[20], "as the uninterrupted run")
PY
"$MPIACCEL" ckpt diff straight.ckpt halves.ckpt --atol 0 > resume.diff 2>&1 || { cat resume.diff; fail "parameters differ after the resume"; }

expect_train_error 2 "quantizes stage 3's parameter all-gathers; stage 2" distributed.strategy=zero zero.stage=2 \
  zero.quantized_weights=true
expect_contains zero3.out "strategy zero3 on 3 rank(s)"
echo PASS
