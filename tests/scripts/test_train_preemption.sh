# ctest: timeout 300
# Pre-emption: SIGUSR1 to one rank of a 3-rank run mid-training. The
# ranks agree at the next step boundary, all take part in a checkpoint, and the
# job exits with the documented status 3; resuming with resume=latest continues
# the losses of an uninterrupted run exactly.
source "$(dirname "$0")/lib.sh" "$1"

JOB="$SOURCE_DIR/jobs/fortunes-gpt.ini"
COMMON=(train.max_steps=40 train.eval_every=0 train.log_every=1 train.sample_tokens=0
        train.seq_len=32 train.batch_size=4 model.n_layer=2 model.n_embd=64
        logging.progress=lines scheduler.name=constant checkpoint.save_at_end=false)

mpi 3 "$MPIACCEL" train --config "$JOB" "${COMMON[@]}" logging.metrics_file=straight.jsonl \
  checkpoint.dir=unused > straight.out 2>&1 || { cat straight.out; fail "uninterrupted run"; }

mpi 3 "$MPIACCEL" train --config "$JOB" "${COMMON[@]}" logging.metrics_file=preempted.jsonl \
  checkpoint.dir=ck > preempted.out 2>&1 &
launcher=$!
# Wait for a few steps, then signal the middle rank only.
wait_for_lines preempted.jsonl '"step"' 5
ranks=($(rank_pids logging.metrics_file=preempted.jsonl mpiaccel))
[ "${#ranks[@]}" = 3 ] || fail "expected 3 rank processes, found ${ranks[*]}"
kill -USR1 "${ranks[1]}"
wait "$launcher"
status=$?
[ "$status" = 3 ] || { cat preempted.out; fail "pre-empted run exited $status, expected 3"; }
expect_contains preempted.out "pre-empted (SIGUSR1/SIGTERM) after step"
grep -q "step_000000" ck/latest || fail "no committed checkpoint named in ck/latest"
saved=$(sed -n 's/.*step_0*\([0-9]*\)\.h5.*/\1/p' ck/latest)
"$MPIACCEL" ckpt verify ck > verify.out 2>&1 || { cat verify.out; fail "checkpoint does not verify"; }

mpi 3 "$MPIACCEL" train --config "$JOB" "${COMMON[@]}" logging.metrics_file=resumed.jsonl \
  checkpoint.dir=ck checkpoint.resume=latest > resumed.out 2>&1 || { cat resumed.out; fail "resume"; }
expect_contains resumed.out "at step $saved"

/usr/bin/python3 - "$saved" <<'PY' || fail "resumed losses do not continue the uninterrupted run"
import json, sys
saved = int(sys.argv[1])
def losses(p): return {r["step"]: r["loss"] for r in map(json.loads, open(p)) if "loss" in r}
straight, before, after = losses("straight.jsonl"), losses("preempted.jsonl"), losses("resumed.jsonl")
assert max(before) == saved, (max(before), saved)
assert sorted(after) == list(range(saved + 1, 41)), sorted(after)
for s in range(1, 41):
    got = before.get(s) if s <= saved else after[s]
    assert got == straight[s], f"step {s}: {got} != {straight[s]}"
print(f"pre-empted after step {saved}; resumed losses identical to the uninterrupted run")
PY
echo PASS
