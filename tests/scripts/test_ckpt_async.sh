# ctest: timeout 300
# Asynchronous checkpoints ([checkpoint] async = true, the default), as
# `mpiaccel train` uses them, at 2 ranks:
#  - the checkpoints of an async run are those of a sync run, bit for bit
#    (ckpt diff --atol 0 at every saved step), and resuming from either
#    continues with identical losses;
#  - a background save that fails (a 2 MiB tmpfs fills up: needs root) ends
#    the job at a later step boundary with one error line, exit 1; `latest`
#    still names the committed step 5, which verifies; no .tmp is left; a
#    later run into a roomier directory saves again.
source "$(dirname "$0")/lib.sh" "$1"

JOB=(--config "$SOURCE_DIR/jobs/fortunes-gpt.ini" train.seq_len=32 model.n_layer=2 model.n_embd=64
     train.batch_size=4 train.eval_every=0 train.log_every=1 train.sample_tokens=0
     logging.progress=lines scheduler.name=constant checkpoint.every_steps=5 checkpoint.keep_last=0)

train() {  # train NAME ARGS...
  local name=$1
  shift
  mpi 2 "$MPIACCEL" train "${JOB[@]}" logging.metrics_file="$name.jsonl" "$@" > "$name.out" 2>&1
}

train sync train.max_steps=20 checkpoint.async=false checkpoint.dir=sync || { cat sync.out; fail "sync run"; }
train async train.max_steps=20 checkpoint.dir=async || { cat async.out; fail "async run"; }
expect_contains async.out "checkpoint async/step_00000005.h5 (writing in the background)"
expect_contains async.out "checkpoint async/step_00000005.h5 committed"
for step in 00000005 00000010 00000015 00000020; do
  "$MPIACCEL" ckpt diff "sync/step_$step.h5" "async/step_$step.h5" --atol 0 > diff.txt 2>&1 \
    || { cat diff.txt; fail "step $step differs between the sync and the async run"; }
done
[ "$(cat async/latest)" = step_00000020.h5 ] || fail "async/latest is $(cat async/latest)"

for kind in sync async; do
  train "resumed_$kind" train.max_steps=20 checkpoint.dir="resume_$kind" \
    checkpoint.resume="$kind/step_00000010.h5" || { cat "resumed_$kind.out"; fail "resume from $kind"; }
done
/usr/bin/python3 - <<'PY' || fail "resuming from the async checkpoint differs from resuming from the sync one"
import json
def losses(p): return [(r["step"], r["loss"]) for r in map(json.loads, open(p)) if "loss" in r]
a, b = losses("resumed_sync.jsonl"), losses("resumed_async.jsonl")
assert a == b and [s for s, _ in a] == list(range(11, 21)), (a, b)
print("resumed from step 10 of either: identical losses for steps 11-20")
PY

# A background save that cannot fit.
[ "$(id -u)" = 0 ] || fail "the full-disk part needs root (a tmpfs mount)"
mkdir -p small
mount -t tmpfs -o size=2M tmpfs small || fail "cannot mount a 2 MiB tmpfs"
trap 'umount "$WORK/small" 2> /dev/null; rm -rf "$WORK"' EXIT
if train full train.max_steps=40 checkpoint.dir=small; then fail "the job ignored a failed background save"; fi
cat full.out
[ "$(grep -c 'not enough space for checkpoint step 10' full.out)" = 1 ] \
  || fail "expected one line saying the save of step 10 does not fit"
[ "$(cat small/latest)" = step_00000005.h5 ] || fail "latest changed to $(cat small/latest)"
"$MPIACCEL" ckpt verify small > verify.txt 2>&1 || { cat verify.txt; fail "step 5 does not verify"; }
[ -z "$(ls -A small | grep '\.tmp$')" ] || fail "a temporary file was left: $(ls -A small)"
train roomy train.max_steps=12 checkpoint.dir=roomy checkpoint.resume="$WORK/small/step_00000005.h5" \
  || { cat roomy.out; fail "saving again elsewhere"; }
[ "$(cat roomy/latest)" = step_00000012.h5 ] || fail "the next run did not save"
echo PASS
