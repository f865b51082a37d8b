# ctest: timeout 600
# Resume equivalence through `mpiaccel train`:
# (constant schedule after warmup: a cosine schedule depends on max_steps)
# - 20 straight steps vs 10 steps, save, a new process, resume, 10 more, at the
#   same world size: bit-identical losses;
# - the same across world sizes 2 -> 3 and 4 -> 2 at the same global batch (24):
#   equal within fp32 tolerance (1e-5 relative).
source "$(dirname "$0")/lib.sh" "$1"

JOB="$SOURCE_DIR/jobs/fortunes-gpt.ini"
COMMON=(train.max_steps=20 train.eval_every=0 train.log_every=1 train.sample_tokens=0
        train.seq_len=32 model.n_layer=2 model.n_embd=64 logging.progress=off
        scheduler.name=constant scheduler.warmup_steps=5)
run() {  # run NP BATCH METRICS EXTRA...
  local np=$1 batch=$2 metrics=$3; shift 3
  mpi "$np" "$MPIACCEL" train --config "$JOB" "${COMMON[@]}" train.batch_size="$batch" \
    logging.metrics_file="$metrics" "$@" > "$metrics.out" 2>&1 || { cat "$metrics.out"; fail "run $metrics"; }
}

run 2 12 straight.jsonl checkpoint.dir=none_saved checkpoint.save_at_end=false
run 2 12 first.jsonl checkpoint.dir=ck2 train.max_steps=10 checkpoint.every_steps=10
[ -f ck2/step_00000010.h5 ] || fail "no checkpoint after 10 steps"
grep -q step_00000010.h5 ck2/latest || fail "latest does not name step 10"
run 2 12 same.jsonl checkpoint.dir=ck2 checkpoint.resume=latest checkpoint.save_at_end=false
expect_contains same.jsonl.out "resumed from ck2/step_00000010.h5 at step 10"
run 3 8 two_to_three.jsonl checkpoint.dir=ck2 checkpoint.resume=ck2/step_00000010.h5 checkpoint.save_at_end=false

run 4 6 first4.jsonl checkpoint.dir=ck4 train.max_steps=10 checkpoint.every_steps=10
run 2 12 four_to_two.jsonl checkpoint.dir=ck4 checkpoint.resume=latest checkpoint.save_at_end=false

/usr/bin/python3 - <<'PY' || fail "resumed losses differ"
import json
def losses(path):
    rows = [json.loads(l) for l in open(path)]
    return {r["step"]: r["loss"] for r in rows if "loss" in r}
straight = losses("straight.jsonl")
first, same = losses("first.jsonl"), losses("same.jsonl")
assert sorted(first) == list(range(1, 11)) and sorted(same) == list(range(11, 21)), (first, same)
for s in range(1, 21):
    got = first.get(s, same.get(s))
    assert got == straight[s], f"same world size, step {s}: {got} != {straight[s]} (must be bit-identical)"
worst = 0.0
for name in ("two_to_three.jsonl", "four_to_two.jsonl"):
    resumed = losses(name)
    assert sorted(resumed) == list(range(11, 21)), resumed
    for s, v in resumed.items():
        rel = abs(v - straight[s]) / abs(straight[s])
        worst = max(worst, rel)
        assert rel < 1e-5, f"{name} step {s}: {v} vs {straight[s]} ({rel:.2e})"
fl = losses("first4.jsonl")
for s, v in fl.items():
    assert abs(v - straight[s]) / straight[s] < 1e-5, f"4-rank run step {s}: {v} vs {straight[s]}"
print(f"same world: bit-identical; 2->3 and 4->2: worst relative difference {worst:.2e}")
PY
echo PASS
