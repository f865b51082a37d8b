# ctest: timeout 1200
# Every job under jobs/*.ini as shipped, the way a user runs it: only
# train.max_steps, checkpoint.dir and logging.metrics_file are overridden (so
# the end-of-run text sample, evaluation and the final checkpoint all run as
# the job file says), at np 2 and np 3 (or the world sizes its header's
# `; ranks: N M` line names: a tensor-parallel mesh needs multiples of its
# tp_size), to a clean exit 0. A job whose header
# has a line `; prepare: mpiaccel ...` (or `# prepare: ...`) gets that command
# run first, from the checkout; a job with `; requires: gpu` is skipped, by
# name, on a machine without one; a job with `; with: jobs/FILE` runs with that
# config file before it (a model-only INI beside a DeepSpeed JSON, the Llama
# job beside the Accelerate YAML). Then
# jobs/accelerate-fsdp2.yaml as shipped, through `mpiaccel launch` at its 4
# processes, with jobs/fortunes-llama.ini: FSDP2, bf16 and LlamaDecoderLayer
# units.
source "$(dirname "$0")/lib.sh" "$1"
cd "$SOURCE_DIR" || fail "no checkout at $SOURCE_DIR"
RUNS=$WORK/runs
have_gpu=0
command -v nvidia-smi > /dev/null && nvidia-smi -L > /dev/null 2>&1 && have_gpu=1

ran=0
for job in jobs/*.ini; do
  name=$(basename "$job" .ini)
  if grep -qE '^[;#] *requires: *gpu' "$job" && [ "$have_gpu" = 0 ]; then
    echo "SKIP $job: it needs a GPU and this machine has none"
    continue
  fi
  prepare=$(sed -nE 's/^[;#] *prepare: *mpiaccel (.*)$/\1/p' "$job")
  if [ -n "$prepare" ]; then
    # shellcheck disable=SC2086
    (cd "$WORK" && "$MPIACCEL" $prepare) > "$WORK/$name.prepare" 2>&1 \
      || { cat "$WORK/$name.prepare"; fail "$job: its prepare step failed: mpiaccel $prepare"; }
  fi
  with=()
  partner=$(sed -nE 's/^[;#] *with: *(.*)$/\1/p' "$job")
  [ -z "$partner" ] || with=(--config "$SOURCE_DIR/$partner")
  ranks=$(sed -nE 's/^[;#] *ranks: *(.*)$/\1/p' "$job")
  for np in ${ranks:-2 3}; do
    out="$WORK/$name.np$np.out"
    (cd "$WORK" && mpi "$np" "$MPIACCEL" train "${with[@]}" --config "$SOURCE_DIR/$job" train.max_steps=6 \
       checkpoint.dir="$RUNS/$name.np$np/checkpoints" logging.metrics_file="$RUNS/$name.np$np/metrics.jsonl") \
      > "$out" 2>&1
    status=$?
    [ "$status" = 0 ] || { tail -40 "$out"; fail "$job at np $np exited $status"; }
    grep -qE '"step": *6[,}]' "$RUNS/$name.np$np/metrics.jsonl" || fail "$job at np $np logged no step 6"
    [ -s "$RUNS/$name.np$np/checkpoints/latest" ] || fail "$job at np $np saved no checkpoint at the end"
    if grep -qE '^model *= *(gpt|llama)' "$job" || ! grep -qE '^model *=' "$job"; then
      sample_tokens=$(sed -nE 's/^sample_tokens *= *([0-9]+).*/\1/p' "$job")
      [ "${sample_tokens:-200}" = 0 ] || grep -q "sample:" "$out" || fail "$job at np $np printed no text sample"
    fi
    echo "ok $job at np $np"
    ran=$((ran + 1))
  done
done
[ "$ran" -gt 0 ] || fail "no job ran"

# Issue 26's "done when": the Accelerate YAML, verbatim, with the Llama job.
out=$WORK/accelerate-fsdp2.out
(cd "$WORK" && OMP_NUM_THREADS=1 "$MPIACCEL" launch --config "$SOURCE_DIR/jobs/accelerate-fsdp2.yaml" -- \
   "$MPIACCEL" train --config "$SOURCE_DIR/jobs/fortunes-llama.ini" train.max_steps=6 \
   checkpoint.dir="$RUNS/yaml-llama/checkpoints" logging.metrics_file="$RUNS/yaml-llama/metrics.jsonl") > "$out" 2>&1 \
  || { tail -40 "$out"; fail "jobs/accelerate-fsdp2.yaml with jobs/fortunes-llama.ini through launch"; }
grep -qE '"step": *6[,}]' "$RUNS/yaml-llama/metrics.jsonl" || fail "the YAML's Llama run logged no step 6"
for says in "mpiaccel train: llama" "strategy fsdp on 4 rank(s)" "precision param=bf16" \
  "FSDP: 4 unit(s) (LlamaDecoderLayer x 4) and the root, sharded over 4 rank(s)" "sample:"; do
  expect_contains "$out" "$says"
done
"$MPIACCEL" ckpt ls "$RUNS/yaml-llama/checkpoints" > "$WORK/yaml-llama.ls" 2>&1 || fail "ckpt ls of the YAML's run"
expect_contains "$WORK/yaml-llama.ls" "step 6, world size 4, strategy fsdp"
# The README's next command: that run, exported, loads in transformers with its tokenizer.
(cd "$WORK" && "$MPIACCEL" ckpt export "$RUNS/yaml-llama/checkpoints" --format hf -o yaml-llama-hf) > "$WORK/export.out" 2>&1 \
  || { cat "$WORK/export.out"; fail "ckpt export --format hf of the YAML's Llama run"; }
"$SOURCE_DIR/.venv/bin/python" - "$WORK/yaml-llama-hf" <<'PY' || fail "transformers cannot load the exported Llama"
import sys, torch
from transformers import AutoTokenizer, LlamaForCausalLM
model = LlamaForCausalLM.from_pretrained(sys.argv[1]).eval()
tokenizer = AutoTokenizer.from_pretrained(sys.argv[1])
ids = tokenizer("What is the", return_tensors="pt").input_ids
with torch.no_grad():
    logits = model(ids).logits
assert torch.isfinite(logits).all() and logits.shape[-1] == model.config.vocab_size == 2048, logits.shape
print(f"transformers loads the exported run: {model.config.torch_dtype}, logits {tuple(logits.shape)}")
PY
echo "ok jobs/accelerate-fsdp2.yaml + jobs/fortunes-llama.ini at np 4 through launch"
echo PASS
