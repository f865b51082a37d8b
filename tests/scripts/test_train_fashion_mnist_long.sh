# ctest: timeout 900; labels long
# The Fashion-MNIST CNN job reaches >= 85 % test accuracy (run by `make bench`).
source "$(dirname "$0")/lib.sh" "$1"

mpi 2 "$MPIACCEL" train --config "$SOURCE_DIR/jobs/fashion-mnist-cnn.ini" \
  logging.progress=lines logging.metrics_file=metrics.jsonl > out.txt 2> err.txt \
  || { cat out.txt err.txt; fail "train exited with $?"; }
/usr/bin/python3 - <<'PY' || fail "accuracy below 85 %"
import json
val = [json.loads(l) for l in open("metrics.jsonl") if "val_acc" in l]
print("val_acc", [round(v["val_acc"], 4) for v in val])
assert val[-1]["val_acc"] >= 0.85, val[-1]
PY
echo "PASS"
