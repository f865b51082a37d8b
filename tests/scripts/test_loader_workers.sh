# ctest: timeout 600
# Loader workers ([train] num_workers, prefetch_factor) and split_batches
# through `mpiaccel train`, the MLP on 6000 Fashion-MNIST images in HDF5
# (h5py writes them twice: contiguous, read with pread, and chunked, read by
# H5Dread under the process's HDF5 lock). Global batch 24 throughout.
# - Workers change nothing: np 2 with 2 workers (and with 1 on the chunked
#   file) gives bit-identical losses and parameters to np 2 without.
# - At other world sizes with workers (np 3, and np 1 by split_batches) the
#   run reproduces np 2 within 1e-5, as every strategy does.
# - split_batches = true with batch_size 24 at np 2 is batch_size 12 without:
#   bit-identical; at np 5 it is refused with the numbers.
# - Resume: 10 steps with 2 workers and an asynchronous save every 5 steps
#   (the background writer and the workers share HDF5 in one process), then
#   10 more at np 3 with 1 worker, equal the uninterrupted run within 1e-5.
source "$(dirname "$0")/lib.sh" "$1"

write() { /usr/bin/python3 "$SOURCE_DIR/tests/python/write_hdf5_arrays.py" fashion "$1" 6000 "$2" \
  || fail "h5py could not write $1"; }
write contiguous.h5 contiguous
write chunked.h5 chunked

COMMON=(--config "$SOURCE_DIR/jobs/fashion-mnist-cnn.ini" train.model=mlp train.dataset=hdf5
        train.hdf5_inputs=/inputs train.hdf5_labels=/labels train.val_fraction=0.1 train.max_steps=20
        train.eval_every=0 train.log_every=1 scheduler.name=constant scheduler.warmup_steps=3
        logging.progress=off checkpoint.save_at_end=true)
run() {  # run NAME NP BATCH FILE EXTRA...
  local name=$1 np=$2 batch=$3 file=$4; shift 4
  mpi "$np" "$MPIACCEL" train "${COMMON[@]}" train.data_dir="$file" train.batch_size="$batch" "$@" \
    logging.metrics_file="$name.jsonl" checkpoint.dir="$name.ckpt" > "$name.out" 2>&1 \
    || { cat "$name.out"; fail "run $name"; }
}

run w0_np2 2 12 contiguous.h5
run w2_np2 2 12 contiguous.h5 train.num_workers=2 train.prefetch_factor=3
compare_runs w0_np2 w2_np2 1 20 0
run w1_chunked_np2 2 12 chunked.h5 train.num_workers=1
compare_runs w0_np2 w1_chunked_np2 1 20 0
run w1_np3 3 8 contiguous.h5 train.num_workers=1
compare_runs w0_np2 w1_np3 1 20 1e-5
run split_w2_np1 1 24 contiguous.h5 train.split_batches=true train.num_workers=2
compare_runs w0_np2 split_w2_np1 1 20 1e-5
expect_contains split_w2_np1.out "global batch 24"
run split_np2 2 24 contiguous.h5 train.split_batches=true
compare_runs w0_np2 split_np2 1 20 0

mpi 5 "$MPIACCEL" train "${COMMON[@]}" train.data_dir=contiguous.h5 train.batch_size=24 \
  train.split_batches=true checkpoint.dir=bad.ckpt > bad.out 2>&1 && fail "split_batches 24 over 5 ranks was accepted"
expect_contains bad.out "[train] split_batches: batch_size 24 is the global batch and does not divide by the 5 ranks"

run first 2 12 chunked.h5 train.num_workers=2 train.max_steps=10 checkpoint.every_steps=5 checkpoint.async=true \
  checkpoint.save_at_end=false
[ -f first.ckpt/step_00000010.h5 ] || fail "no checkpoint at step 10"
run resumed 3 8 chunked.h5 train.num_workers=1 checkpoint.resume=first.ckpt/step_00000010.h5
expect_contains resumed.out "resumed from first.ckpt/step_00000010.h5 at step 10"
/usr/bin/python3 - <<'PY' || fail "the resumed run differs from the uninterrupted one"
import json
def losses(p): return {r["step"]: r["loss"] for r in map(json.loads, open(p)) if "loss" in r}
straight, first, resumed = losses("w0_np2.jsonl"), losses("first.jsonl"), losses("resumed.jsonl")
assert sorted(first) == list(range(1, 11)) and sorted(resumed) == list(range(11, 21)), (first, resumed)
worst = max(abs({**first, **resumed}[s] - straight[s]) / straight[s] for s in range(1, 21))
print(f"resumed at np 3 with a worker: worst loss relative difference {worst:.2e}")
assert worst <= 1e-5
PY
"$MPIACCEL" ckpt diff w0_np2.ckpt resumed.ckpt --atol 1e-5 > resumed.diff 2>&1 \
  || { cat resumed.diff; fail "resumed parameters differ"; }
echo "PASS"
