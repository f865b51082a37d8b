# ctest: timeout 120
# Hang watchdog: one rank stalls (MPIACCEL_TEST_STALL) in step 3. The
# job ends within timeout_s plus a small margin with a non-zero status, and the
# log names the stalled op and where the ranks were.
source "$(dirname "$0")/lib.sh" "$1"

timeout_s=5
start=$(date +%s)
mpi 2 -x MPIACCEL_TEST_STALL=1:3:600 "$MPIACCEL" train --config "$SOURCE_DIR/jobs/fortunes-gpt.ini" \
  distributed.timeout_s=$timeout_s train.max_steps=10 train.eval_every=0 train.sample_tokens=0 \
  train.seq_len=32 model.n_layer=2 model.n_embd=64 logging.progress=off checkpoint.dir=ck \
  > out.txt 2> err.txt
status=$?
elapsed=$(( $(date +%s) - start ))
[ "$status" != 0 ] || fail "a stalled job exited 0"
# Start-up (a few s) + timeout_s + the watchdog's period + the abort grace.
[ "$elapsed" -le $((timeout_s + 25)) ] || fail "took ${elapsed}s, timeout_s is ${timeout_s}s"
cat err.txt
grep -q "all_reduce of .* did not complete within 5 s" err.txt \
  || grep -q "watchdog: this rank made no progress for .* at: step 3: injected stall" err.txt \
  || fail "the log names neither the stalled all_reduce nor the stalled rank"
grep -q "step 3" err.txt || fail "the log does not say which step"
echo "PASS (ended after ${elapsed}s)"
