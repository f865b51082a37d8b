# ctest: timeout 300
# [logging] report_to = jsonl, tensorboard: event files that tensorboard's
# own EventAccumulator reads (tests/python/check_tensorboard.py, the .venv's
# tensorboard), with every value of the metrics file (loss, learning rate,
# grad norm, throughput, validation loss and accuracy) at its step, the
# resolved config and the end-of-run sample as texts. A run resumed from an
# earlier checkpoint appends without duplicating steps, in TensorBoard's
# view as in the metrics file. An unknown report_to is refused in one line.
source "$(dirname "$0")/lib.sh" "$1"

PY=$SOURCE_DIR/.venv/bin/python
"$PY" -c 'import tensorboard' 2> /dev/null || fail "$PY cannot import tensorboard: run make deps (requirements-torch.txt)"

GPT=(--config "$SOURCE_DIR/jobs/fortunes-gpt.ini" train.seq_len=32 model.n_layer=2 model.n_embd=64
     train.max_steps=20 train.log_every=5 train.eval_every=10 train.eval_batches=2 train.sample_tokens=40
     logging.progress=off logging.report_to="jsonl, tensorboard" logging.logging_dir=tb
     logging.metrics_file=metrics.jsonl checkpoint.dir=ckpt checkpoint.every_steps=10)
sample() {  # the text after "sample:" in a run's output
  /usr/bin/python3 -c 'import sys; t = open(sys.argv[1]).read(); sys.stdout.write(t[t.rindex("sample:\n") + 8:-1])' "$1"
}

mpi 2 "$MPIACCEL" train "${GPT[@]}" > run.out 2>&1 || { cat run.out; fail "a run reporting to TensorBoard"; }
expect_contains run.out "TensorBoard: events in tb/events.out.tfevents."
sample run.out > sample.txt
"$PY" "$SOURCE_DIR/tests/python/check_tensorboard.py" tb metrics.jsonl sample.txt || fail "TensorBoard reads otherwise"

# Resume from step 10 (as after a crash past it): steps 15 and 20 again.
mpi 2 "$MPIACCEL" train "${GPT[@]}" checkpoint.resume="$WORK/ckpt/step_00000010.h5" > resumed.out 2>&1 \
  || { cat resumed.out; fail "the resumed run"; }
[ "$(ls tb | wc -l)" = 2 ] || fail "the resumed run did not add its own event file: $(ls tb)"
sample resumed.out > sample.txt
"$PY" "$SOURCE_DIR/tests/python/check_tensorboard.py" tb metrics.jsonl sample.txt \
  || fail "TensorBoard's view of the resumed run differs from the metrics file"
[ "$(grep -c '"step": 15,' metrics.jsonl)" = 1 ] || fail "the metrics file holds step 15 twice"

# A classifier's metric (val_acc: eval/acc) beside its loss.
mpi 2 "$MPIACCEL" train --config "$SOURCE_DIR/jobs/fashion-mnist-cnn.ini" train.model=mlp model.hidden_size=32 \
  train.max_steps=10 train.log_every=5 train.eval_every=5 train.eval_batches=2 logging.progress=off \
  logging.report_to=all logging.logging_dir=tb_mlp logging.metrics_file=mlp.jsonl checkpoint.dir=ckpt_mlp \
  > mlp.out 2>&1 || { cat mlp.out; fail "an MLP reporting to TensorBoard"; }
grep -q '"val_acc"' mlp.jsonl || fail "the MLP logged no val_acc"
"$PY" "$SOURCE_DIR/tests/python/check_tensorboard.py" tb_mlp mlp.jsonl - || fail "TensorBoard reads the MLP's otherwise"

# Only TensorBoard: no metrics file; a tracker we do not have: refused.
mpi 1 "$MPIACCEL" train "${GPT[@]}" logging.report_to=tensorboard logging.logging_dir=tb_only \
  logging.metrics_file=none.jsonl train.max_steps=5 checkpoint.dir=ckpt_only > only.out 2>&1 || { cat only.out; fail "tensorboard only"; }
[ ! -e none.jsonl ] || fail "report_to = tensorboard wrote the metrics file"
[ "$(ls tb_only | wc -l)" = 1 ] || fail "report_to = tensorboard wrote no event file"
if mpi --timeout 120 2 "$MPIACCEL" train "${GPT[@]}" logging.report_to="jsonl, wandb" train.max_steps=1 \
     checkpoint.dir=ckpt_bad > bad.out 2>&1; then
  fail "report_to = wandb was accepted"
fi
expect_contains bad.out "[logging] report_to: 'wandb' is unknown; accepted: a list of jsonl and tensorboard, or all, or none"
echo PASS
