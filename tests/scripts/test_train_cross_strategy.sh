# ctest: timeout 600
# Cross-strategy resume through `mpiaccel train`: a checkpoint saved by
# one strategy at one world size loads into another strategy at another world
# size, at the same global batch (12), and the losses continue those of an
# uninterrupted single-process run within fp32 tolerance (1e-5 relative):
#   DDP on 2 -> FSDP on 3;  ZeRO-2 on 4 -> DDP on 1;  FSDP on 3 -> ZeRO-1 on 2.
source "$(dirname "$0")/lib.sh" "$1"

# SGD with momentum: AdamW magnifies the rounding noise of exactly-zero
# gradients (see docs/fsdp.md), which is a property of the model, not of the
# strategies compared here.
COMMON=(--config "$SOURCE_DIR/jobs/fortunes-gpt.ini" train.max_steps=16 train.eval_every=0
        train.log_every=1 train.sample_tokens=0 train.seq_len=32 model.n_layer=2 model.n_embd=64
        logging.progress=off scheduler.name=constant scheduler.warmup_steps=3
        optimizer.name=sgd optimizer.momentum=0.9 optimizer.lr=0.05 checkpoint.save_at_end=false)
run() {  # run NAME NP STRATEGY-ARGS...
  local name=$1 np=$2; shift 2
  mpi "$np" "$MPIACCEL" train "${COMMON[@]}" train.batch_size=$((12 / np)) \
    logging.metrics_file="$name.jsonl" "$@" > "$name.out" 2>&1 || { cat "$name.out"; fail "run $name"; }
}

run reference 1 distributed.strategy=no checkpoint.dir=unused
run ddp2 2 distributed.strategy=ddp checkpoint.dir=a checkpoint.every_steps=8 train.max_steps=8
run fsdp3 3 distributed.strategy=fsdp checkpoint.dir=a checkpoint.resume=latest
expect_contains fsdp3.out "saved by 2 rank(s), strategy ddp"
run zero2_4 4 distributed.strategy=zero zero.stage=2 checkpoint.dir=b checkpoint.every_steps=8 train.max_steps=8
run ddp1 1 distributed.strategy=ddp checkpoint.dir=b checkpoint.resume=latest
expect_contains ddp1.out "saved by 4 rank(s), strategy zero2"
run fsdp3b 3 distributed.strategy=fsdp checkpoint.dir=c checkpoint.every_steps=8 train.max_steps=8
run zero1_2 2 distributed.strategy=zero zero.stage=1 checkpoint.dir=c checkpoint.resume=latest
expect_contains zero1_2.out "saved by 3 rank(s), strategy fsdp"

/usr/bin/python3 - <<'PY' || fail "losses after a cross-strategy resume differ"
import json
def losses(p): return {r["step"]: r["loss"] for r in map(json.loads, open(p)) if "loss" in r}
ref = losses("reference.jsonl")
worst = 0.0
for before, after in (("ddp2", "fsdp3"), ("zero2_4", "ddp1"), ("fsdp3b", "zero1_2")):
    a, b = losses(before + ".jsonl"), losses(after + ".jsonl")
    assert sorted(a) == list(range(1, 9)) and sorted(b) == list(range(9, 17)), (before, a, b)
    for s, v in {**a, **b}.items():
        rel = abs(v - ref[s]) / abs(ref[s])
        worst = max(worst, rel)
        assert rel < 1e-5, f"{before}->{after} step {s}: {v} vs {ref[s]} ({rel:.2e})"
print(f"worst relative loss difference against single-process: {worst:.2e}")
PY
echo PASS
