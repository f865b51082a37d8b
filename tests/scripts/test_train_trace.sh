# ctest: timeout 180
# Timeline trace: [logging] trace writes one Chrome trace JSON merged
# from every rank; it is valid JSON and shows a DDP bucket's all-reduce running
# while backward is still going (overlap).
source "$(dirname "$0")/lib.sh" "$1"

mpi 2 "$MPIACCEL" train --config "$SOURCE_DIR/jobs/fortunes-gpt.ini" train.max_steps=8 \
  train.eval_every=0 train.sample_tokens=0 logging.progress=off checkpoint.dir=ck \
  logging.trace=trace/run.json > out.txt 2>&1 || { cat out.txt; fail "train"; }
expect_contains out.txt "trace: trace/run.json"
/usr/bin/python3 - <<'PY' || fail "trace is not valid or shows no overlap"
import json
events = json.load(open("trace/run.json"))["traceEvents"]
spans = [e for e in events if e.get("ph") == "X"]
names = {e["name"] for e in spans}
for needed in ("forward", "backward", "optimizer step", "checkpoint save"):
    assert needed in names, (needed, names)
assert {e["pid"] for e in spans} == {0, 1}, "both ranks' spans are merged"
overlapping = 0
for rank in (0, 1):
    backward = [e for e in spans if e["pid"] == rank and e["name"] == "backward"]
    comm = [e for e in spans if e["pid"] == rank and e["name"].startswith("all_reduce bucket")]
    assert comm, "no bucket all-reduce spans"
    for c in comm:
        for b in backward:
            if b["ts"] <= c["ts"] < b["ts"] + b["dur"]:
                overlapping += 1
                break
assert overlapping > 0, "no all-reduce started inside a backward span"
print(f"{len(spans)} spans; {overlapping} bucket all-reduces started during backward")
PY
echo PASS
