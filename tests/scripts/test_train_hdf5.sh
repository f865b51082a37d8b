# ctest: timeout 400
# [train] dataset = hdf5 end to end: h5py writes 6000 Fashion-MNIST images
# (float32 [N, 1, 28, 28]) and labels to one file; the bundled MLP trains on
# it at np 2 (each rank reading its own rows), validated on the file's last
# 10 % of rows, and learns.
source "$(dirname "$0")/lib.sh" "$1"

/usr/bin/python3 "$SOURCE_DIR/tests/python/write_hdf5_arrays.py" fashion fashion.h5 6000 \
  || fail "h5py could not write fashion.h5"
mpi 2 "$MPIACCEL" train --config "$SOURCE_DIR/jobs/fashion-mnist-cnn.ini" \
  train.model=mlp train.dataset=hdf5 train.data_dir=fashion.h5 train.hdf5_inputs=/inputs \
  train.hdf5_labels=/labels train.val_fraction=0.1 train.max_steps=80 train.eval_every=40 \
  train.log_every=10 scheduler.warmup_steps=5 logging.progress=lines \
  logging.metrics_file=metrics.jsonl checkpoint.dir=ckpt > out.txt 2>&1 \
  || { cat out.txt; fail "train exited with $?"; }
expect_contains out.txt "on hdf5"
expect_contains out.txt "training on 5400 samples"
/usr/bin/python3 - <<'PY' || fail "the MLP did not learn from the HDF5 file"
import json
rows = [json.loads(l) for l in open("metrics.jsonl")]
train = [r for r in rows if "loss" in r]
val = [r for r in rows if "val_loss" in r]
assert train[-1]["loss"] < train[0]["loss"] - 0.5, (train[0], train[-1])
assert val and val[-1]["val_acc"] > 0.6, val
print("loss", train[0]["loss"], "->", train[-1]["loss"], "val_acc", val[-1]["val_acc"])
PY
echo "PASS"
