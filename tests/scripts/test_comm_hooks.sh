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
/usr/bin/python3 - ddp.jsonl powersgd.jsonl:0.02 wrapped.jsonl:0.02 batched.jsonl:0.2 <<'PY' \
  || fail "a PowerSGD run's loss is not within its bound of DDP's"
import json, sys
def val(p): return [r["val_loss"] for r in map(json.loads, open(p)) if "val_loss" in r][-1]
ref = val(sys.argv[1])
for arg in sys.argv[2:]:
    path, bound = arg.split(":")
    got = val(path)
    print(f"{path}: val_loss {got:.4f} against DDP's {ref:.4f} ({100 * (got - ref) / ref:+.2f} %, bound {bound})")
    assert abs(got - ref) <= float(bound) * ref
PY

# Resume: 20 steps straight, against 10 + 10 across a checkpoint.
SHORT=(train.eval_every=1000 "${POWERSGD[@]}" ddp.powersgd_start_iter=5)
train_run straight 2 16 GPT train.max_steps=20 "${SHORT[@]}"
train_run halves 2 16 GPT train.max_steps=10 "${SHORT[@]}"
cp -r halves.ckpt other_world.ckpt
train_run halves 2 16 GPT train.max_steps=20 "${SHORT[@]}" checkpoint.resume=latest
expect_contains halves.out "resumed from"
/usr/bin/python3 - straight.jsonl halves.jsonl <<'PY' || fail "the resumed PowerSGD run differs"
import json, sys
def losses(p): return {r["step"]: r["loss"] for r in map(json.loads, open(p)) if "loss" in r}
a, b = losses(sys.argv[1]), losses(sys.argv[2])
assert 20 in a and a[20] == b[20], (a.get(20), b.get(20))
print("resumed PowerSGD run: step 20 loss", b[20], "as the uninterrupted run")
PY
"$MPIACCEL" ckpt diff straight.ckpt halves.ckpt --atol 0 > resume.diff 2>&1 || { cat resume.diff; fail "parameters differ after the resume"; }

# At another world size the checkpoint still loads; error feedback restarts.
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
