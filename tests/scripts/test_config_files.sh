# ctest: timeout 900
# Config files as users bring them, written by the real producers in the
# project's .venv: accelerate's ClusterConfig.to_yaml_file (DDP, FSDP,
# DeepSpeed ZeRO-2 with offload) and transformers'
# TrainingArguments.to_json_string (DDP, FSDP, DeepSpeed), plus the bundled
# jobs/accelerate-fsdp2.yaml (issue 26's example, verbatim) and
# jobs/deepspeed-zero2-offload.json (the ZeRO-2 + offload example of the
# Trainer's DeepSpeed documentation, with "auto"). Each trains, combined with a model-only INI, to the same
# losses, step for step, as an INI written by hand for the same settings.
# Then: `mpiaccel config --from` writes an INI that reads back to the same
# config; the user's default config is read without --config; bad files end
# with one line naming file:line; DeepSpeed's batch arithmetic is checked at
# start-up; and the committed TrainingArguments defaults are transformers'.
source "$(dirname "$0")/lib.sh" "$1"
PYTHON=$SOURCE_DIR/.venv/bin/python
"$PYTHON" -c "import accelerate, transformers" 2> /dev/null || fail "no accelerate/transformers in $SOURCE_DIR/.venv: run make deps"
"$PYTHON" "$SOURCE_DIR/tests/python/write_config_producers.py" "$WORK" > producers.txt 2> producers.err ||
  { cat producers.err; fail "the producers failed"; }

cat > model.ini <<'INI'
; The model and data only: the distribution comes from the other files.
[train]
model = gpt
dataset = fortunes
seq_len = 32
eval_batches = 2
num_threads = 1
sample_tokens = 0

[model]
n_layer = 2
n_head = 2
n_embd = 32
INI

# train NAME NP CONFIG... [-- OVERRIDE...]: a 4-step run, its losses in NAME.losses.
train() {
  local name=$1 np=$2 args=()
  shift 2
  while [ $# -gt 0 ] && [ "$1" != -- ]; do args+=(--config "$1"); shift; done
  [ $# -gt 0 ] && shift
  mpi "$np" "$MPIACCEL" train "${args[@]}" "$@" train.max_steps=4 train.log_every=1 train.eval_every=0 \
    checkpoint.save_at_end=false checkpoint.dir="$WORK/$name.ckpt" logging.metrics_file="$WORK/$name.jsonl" \
    > "$name.out" 2>&1 || { tail -20 "$name.out"; fail "$name: training failed"; }
  sed -nE 's/.*"step": *([0-9]+).*"loss": *([^,}]+).*/\1 \2/p' "$name.jsonl" > "$name.losses"
  [ "$(wc -l < "$name.losses")" = 4 ] || { cat "$name.jsonl"; fail "$name: not 4 logged steps"; }
}

# Equal losses, and the same start-up line (strategy, ranks, device,
# backend, global batch, precision): strategies reproduce each other's
# losses, so the losses alone would not show a strategy that was lost.
same_losses() {  # same_losses A B
  cmp -s "$1.losses" "$2.losses" || { paste "$1.losses" "$2.losses"; fail "$1 and $2 differ"; }
  [ "$(grep '^training on' "$1.out")" = "$(grep '^training on' "$2.out")" ] ||
    { grep -h '^training on' "$1.out" "$2.out"; fail "$1 and $2 train differently"; }
  echo "ok $1 = $2: $(grep -o 'strategy .*' "$1.out" | head -1); $(tr '\n' ' ' < "$1.losses")"
}

cat > args.ini <<'INI'
; What args_*.json say, by hand.
[distributed]
device = cpu
timeout_s = 300
seed = 42
[optimizer]
lr = 2e-3
weight_decay = 0.1
betas = 0.9, 0.95
[scheduler]
name = cosine
warmup_steps = 1
[train]
batch_size = 4
grad_accum_steps = 2
drop_last = false
INI

# Accelerate's YAML, as its config classes write it.
printf '[distributed]\nstrategy = ddp\ndevice = cpu\n' > ddp.ini
train accelerate_ddp 2 accelerate_ddp.yaml model.ini
train accelerate_ddp.ini 2 ddp.ini model.ini
same_losses accelerate_ddp accelerate_ddp.ini

cat > fsdp.ini <<'INI'
[distributed]
strategy = fsdp
device = cpu
[fsdp]
transformer_layer_cls_to_wrap = DecoderLayer
INI
train accelerate_fsdp 2 accelerate_fsdp.yaml model.ini
train accelerate_fsdp.ini 2 fsdp.ini model.ini
same_losses accelerate_fsdp accelerate_fsdp.ini

printf '[distributed]\nstrategy = zero\ndevice = cpu\n[zero]\nstage = 2\noffload_optimizer = cpu\n' > zero2.ini
train accelerate_zero2 2 accelerate_zero2.yaml model.ini
train accelerate_zero2.ini 2 zero2.ini model.ini
same_losses accelerate_zero2 accelerate_zero2.ini

# TrainingArguments JSON, as transformers writes it.
printf '[distributed]\nstrategy = ddp\n[ddp]\nbucket_cap_mb = 4\n[train]\nnum_workers = 2\nprefetch_factor = 3\nnon_blocking = true\n' > args_ddp.ini
train args_ddp 2 args_ddp.json model.ini
train args_ddp.ini 2 args.ini args_ddp.ini model.ini
same_losses args_ddp args_ddp.ini
printf '[distributed]\nstrategy = fsdp\n[fsdp]\ntransformer_layer_cls_to_wrap = DecoderLayer\n' > args_fsdp.ini
train args_fsdp 2 args_fsdp.json model.ini
train args_fsdp.ini 2 args.ini args_fsdp.ini model.ini
same_losses args_fsdp args_fsdp.ini
printf '[distributed]\nstrategy = zero\n[zero]\nstage = 1\n' > args_zero1.ini
train args_deepspeed 2 args_deepspeed.json model.ini
train args_deepspeed.ini 2 args.ini args_zero1.ini model.ini
same_losses args_deepspeed args_deepspeed.ini

# The Trainer documentation's DeepSpeed ZeRO-2 + CPU offload example, "auto"
# everywhere it allows: the values come from the other files or the defaults.
cat > ds_by_hand.ini <<'INI'
[distributed]
strategy = zero
[zero]
stage = 2
offload_optimizer = cpu
reduce_bucket_mb = 762.939453125
allgather_bucket_mb = 762.939453125
[scheduler]
name = constant
INI
train deepspeed_json 2 "$SOURCE_DIR/jobs/deepspeed-zero2-offload.json" model.ini
train deepspeed_json.ini 2 ds_by_hand.ini model.ini
same_losses deepspeed_json deepspeed_json.ini

# Issue 26's YAML, verbatim, through `mpiaccel launch` at its 4 processes.
# Its unit class is the Llama block's; the GPT's is DecoderLayer.
mpi_launch() {
  "$MPIACCEL" launch --config "$SOURCE_DIR/jobs/accelerate-fsdp2.yaml" -- "$MPIACCEL" train --config model.ini \
    fsdp.transformer_layer_cls_to_wrap=DecoderLayer train.max_steps=4 train.log_every=1 train.eval_every=0 \
    checkpoint.save_at_end=false logging.metrics_file="$WORK/fsdp2_yaml.jsonl"
}
"$MPIACCEL" launch --dry-run --config "$SOURCE_DIR/jobs/accelerate-fsdp2.yaml" -- "$MPIACCEL" train --config model.ini \
  > launch.txt 2> /dev/null || fail "launch --dry-run of the bundled YAML"
expect_contains launch.txt "-np 4 "
expect_contains launch.txt "train --config $SOURCE_DIR/jobs/accelerate-fsdp2.yaml --config model.ini"
OMP_NUM_THREADS=1 mpi_launch > fsdp2_yaml.out 2>&1 || { tail -20 fsdp2_yaml.out; fail "the bundled YAML through launch failed"; }
sed -nE 's/.*"step": *([0-9]+).*"loss": *([^,}]+).*/\1 \2/p' fsdp2_yaml.jsonl > fsdp2_yaml.losses
cat > fsdp2_by_hand.ini <<'INI'
[distributed]
strategy = fsdp
mixed_precision = bf16
[fsdp]
transformer_layer_cls_to_wrap = DecoderLayer
INI
train fsdp2_by_hand 4 fsdp2_by_hand.ini model.ini
same_losses fsdp2_yaml fsdp2_by_hand

# `mpiaccel config --from`: every key with its origin; the INI it writes is
# the same config (estimate-memory prints the config's shape and numbers).
"$MPIACCEL" config --from accelerate_zero2.yaml args_deepspeed.json > from.txt 2>&1 && fail "conflicting files were accepted"
expect_contains from.txt "accelerate_zero2.yaml:"
expect_contains from.txt "args_deepspeed.json:"
"$MPIACCEL" config --from "$SOURCE_DIR/jobs/accelerate-fsdp2.yaml" "$SOURCE_DIR/jobs/deepspeed-zero2-offload.json" \
  > both.txt 2>&1 && fail "FSDP and ZeRO together were accepted" || expect_contains both.txt "distributed.strategy"
"$MPIACCEL" config --from "$SOURCE_DIR/jobs/accelerate-fsdp2.yaml" model.ini -o translated.ini > /dev/null ||
  fail "config --from -o failed"
expect_contains translated.ini "; from $SOURCE_DIR/jobs/accelerate-fsdp2.yaml:2 (distributed_type)"
expect_contains translated.ini "compute_environment: mpirun or srun starts the ranks"
"$MPIACCEL" estimate-memory --json --config translated.ini > a.json || fail "estimate-memory of the translation"
"$MPIACCEL" estimate-memory --json --config "$SOURCE_DIR/jobs/accelerate-fsdp2.yaml" --config model.ini > b.json ||
  fail "estimate-memory of the two files"
cmp -s a.json b.json || fail "the translated INI is not the same config as its files"

# The user's default config, when no --config is given; `mpiaccel env` names it.
mkdir -p xdg/mpiaccel && cp model.ini xdg/mpiaccel/default.ini
XDG_CONFIG_HOME=$WORK/xdg train default_config 1 -- || fail "the default config was not read"
XDG_CONFIG_HOME=$WORK/xdg "$MPIACCEL" env > env.txt 2>&1 || { cat env.txt; fail "mpiaccel env failed"; }
expect_contains env.txt "default config  $WORK/xdg/mpiaccel/default.ini (read when no --config is given)"

# Bad files: one line naming file:line, printed once, and a failed job.
bad() {  # bad FILE TEXT EXPECTED
  printf '%s' "$2" > "$1"
  if mpi 2 "$MPIACCEL" train --config "$1" --config model.ini > "$1.out" 2> "$1.err"; then fail "$1 was accepted"; fi
  expect_contains "$1.err" "mpiaccel: train: $3"
  [ "$(grep -c 'mpiaccel: train:' "$1.err")" = 1 ] || { cat "$1.err"; fail "$1: not reported once"; }
}
bad syntax.yaml $'distributed_type: FSDP\nfsdp_config:\n  fsdp_version: [2\n' "syntax.yaml:4: YAML syntax error"
bad truncated.json $'{\n  "zero_optimization": {\n    "stage": 2,\n' "truncated.json:4: JSON syntax error"
bad type.yaml $'num_processes: 2\nmixed_precision: fp8\n' "type.yaml:2: mixed_precision = \"fp8\": not a value mpiaccel supports"
bad unknown.json $'{\n  "zero_optimization": {"stage": 2},\n  "zero_optimisation": {"stage": 3}\n}\n' \
  "unknown.json:3: zero_optimisation.stage = 3: not a key mpiaccel knows"
bad compile.yaml $'distributed_type: MULTI_CPU\ndynamo_config:\n  dynamo_backend: INDUCTOR\n' \
  "compile.yaml:3: dynamo_config.dynamo_backend = \"INDUCTOR\": LibTorch has no torch.compile"
printf '{"train_batch_size": 16, "train_micro_batch_size_per_gpu": 4}\n' > batch.json
mpi 3 "$MPIACCEL" train --config batch.json --config model.ini > batch.out 2>&1 && fail "a wrong train_batch_size was accepted"
expect_contains batch.out "batch.json:1: train_batch_size = 16, but train.batch_size 4 × train.grad_accum_steps 1 × 3 ranks = 12"

# The defaults mpiaccel compares TrainingArguments fields with are the .venv transformers'.
"$PYTHON" "$SOURCE_DIR/tools/config/training_arguments_defaults.py" > defaults.inc 2> /dev/null ||
  fail "cannot regenerate the TrainingArguments defaults"
diff defaults.inc "$SOURCE_DIR/src/config/training_arguments_defaults.inc" ||
  fail "src/config/training_arguments_defaults.inc is not this transformers' (regenerate it: tools/config/training_arguments_defaults.py)"
echo PASS
