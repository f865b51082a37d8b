# ctest: timeout 300
# The main job, shortened: 2 ranks of DDP on the fortunes text; the loss falls,
# validation loss falls, metrics are written, a sample is printed.
source "$(dirname "$0")/lib.sh" "$1"

mpi 2 "$MPIACCEL" train --config "$SOURCE_DIR/jobs/fortunes-gpt.ini" \
  train.max_steps=40 train.eval_every=20 train.log_every=5 train.sample_tokens=40 \
  logging.progress=lines logging.metrics_file=metrics.jsonl checkpoint.dir=ckpt > out.txt 2> err.txt \
  || { cat out.txt err.txt; fail "train exited with $?"; }
expect_contains out.txt "strategy ddp on 2 rank(s)"
expect_contains out.txt "sample:"
/usr/bin/python3 - <<'PY' || fail "metrics do not show learning"
import json
rows = [json.loads(l) for l in open("metrics.jsonl")]
train = [r for r in rows if "loss" in r]
val = [r for r in rows if "val_loss" in r]
assert [r["step"] for r in train] == list(range(5, 41, 5)), train
for r in train:
    assert {"step", "loss", "lr", "elapsed_s", "tokens_per_s"} <= r.keys(), r
assert train[-1]["loss"] < train[0]["loss"] - 1.0, (train[0], train[-1])
assert len(val) == 2 and val[1]["val_loss"] < val[0]["val_loss"], val
print("loss", train[0]["loss"], "->", train[-1]["loss"], "val", [v["val_loss"] for v in val])
PY
echo "PASS"
