# ctest: timeout 600
# DDP communication hooks through `mpiaccel train` (docs/ddp.md,
# "Communication hooks"), on the bundled GPT (2 layers, width 128: its
# matrices are large enough for rank 32 to pay):
# - PowerSGD at rank 32 (from step 10, error feedback, warm start) ends 300
#   steps within 2 % of plain DDP's validation loss, with fp32 and with bf16
#   messages (comm_wrapper); batched PowerSGD (one square matrix per bucket,
#   a far coarser approximation) within 20 % (measured +12 %);
# - a resume across a PowerSGD checkpoint reproduces the uninterrupted run bit
#   for bit (error feedback, warm-start Q and step count are in the file);
# - the same checkpoint resumes at another world size (the per-rank error
#   feedback starts from zero there);
# - Accelerate's hook names (its DDPCommunicationHookType, read from the
#   .venv) are all [ddp] comm_hook values, and every option of the .venv
#   torch's PowerSGDState has its row in docs/ddp.md;
# - hook settings that conflict are one-line errors.
source "$(dirname "$0")/lib.sh" "$1"

GPT=(--config "$SOURCE_DIR/jobs/fortunes-gpt.ini" model.n_layer=2)
COMMON=(train.log_every=10 train.sample_tokens=0 logging.progress=off train.eval_batches=20
        checkpoint.save_at_end=true)
POWERSGD=(ddp.comm_hook=powersgd ddp.powersgd_rank=32 ddp.powersgd_start_iter=10)

train_run ddp 2 16 GPT train.max_steps=300 train.eval_every=300
train_run powersgd 2 16 GPT train.max_steps=300 train.eval_every=300 "${POWERSGD[@]}"
expect_contains powersgd.out "powersgd (rank 32, from step 10):"
train_run wrapped 2 16 GPT train.max_steps=300 train.eval_every=300 "${POWERSGD[@]}" ddp.comm_wrapper=bf16
train_run batched 2 16 GPT train.max_steps=300 train.eval_every=300 ddp.comm_hook=batched_power_sgd \
  ddp.powersgd_rank=32 ddp.powersgd_start_iter=10
expect_val_loss_within ddp powersgd 0.02
expect_val_loss_within ddp wrapped 0.02
expect_val_loss_within ddp batched 0.2

# Resume: 20 steps straight, against 10 + 10 across a checkpoint.
SHORT=(train.eval_every=1000 "${POWERSGD[@]}" ddp.powersgd_start_iter=5)
expect_exact_resume GPT "${SHORT[@]}"

# At another world size the checkpoint still loads; error feedback restarts.
cp -r halves_at_10.ckpt other_world.ckpt
train_run other_world 4 16 GPT train.max_steps=12 "${SHORT[@]}" checkpoint.resume=latest
expect_contains other_world.out "resumed from"

# The real producers' names: Accelerate's hook types, torch's PowerSGDState options.
PYTHON=$SOURCE_DIR/.venv/bin/python
hooks=$("$PYTHON" -c 'from accelerate.utils import DDPCommunicationHookType as T; print(*[t.value for t in T])') \
  || fail "cannot read accelerate's DDPCommunicationHookType: run make deps"
for v in $hooks; do
  "$MPIACCEL" config --defaults -o - ddp.comm_hook="$v" > /dev/null 2> hook.err || { cat hook.err; fail "Accelerate's comm_hook $v is refused"; }
done
options=$("$PYTHON" -c 'import inspect
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as p
print(*[n for n in inspect.signature(p.PowerSGDState.__init__).parameters if n not in ("self", "process_group")])')
for o in $options; do grep -qF "$o" "$SOURCE_DIR/docs/ddp.md" || fail "PowerSGDState's $o has no row in docs/ddp.md"; done

# Conflicts: one line each.
expect_train_error 2 "comm_wrapper = bf16 wraps PowerSGD's all-reduces" ddp.comm_wrapper=bf16
expect_train_error 2 "reduce_dtype is bf16" ddp.comm_hook=fp16 distributed.mixed_precision=bf16
expect_train_error 2 "powersgd_rank" ddp.comm_hook=powersgd ddp.powersgd_rank=0
expect_train_error 2 "reduces DDP's gradient buckets, but [distributed] strategy = fsdp" ddp.comm_hook=powersgd \
  distributed.strategy=fsdp
echo PASS
