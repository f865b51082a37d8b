# ctest: timeout 600
# [model] init_from is from_pretrained: a Hugging Face directory's
# config.json alone builds the model, with transformers in the project's
# .venv as the oracle (tests/python/llama_oracle.py):
#  - a random LlamaForCausalLM (grouped-query attention, Llama 3.1 rotary
#    scaling, biases, an untied head) starts a run from a job that names no
#    model at all: the family and every dimension come from config.json, the
#    run's first lines say which, and after one step at lr 1e-30 its logits
#    equal transformers' within 1e-5; exported again it is bit-identical;
#  - `mpiaccel generate --model DIR` runs the directory as it is, alone and
#    under FSDP at np 2: the same logits and 50 greedy tokens as transformers;
#    `mpiaccel estimate-memory` counts the directory's model;
#  - a GPT2LMHeadModel (gelu_new) the same way: the GPT, its sequence length
#    and its activation from config.json, logits within 1e-5 of transformers';
#  - a key the user sets that disagrees with the file is refused in one line
#    naming both, and so is a family the user names against the file's; a
#    file that sets every key gets every disagreement in one line; a field
#    the model cannot compute is refused by name.
source "$(dirname "$0")/lib.sh" "$1"

PY=$SOURCE_DIR/.venv/bin/python
ORACLE=$SOURCE_DIR/tests/python/llama_oracle.py
"$PY" -c 'import transformers, safetensors' 2> /dev/null \
  || fail "$PY cannot import transformers and safetensors: run make deps (requirements-torch.txt)"

# A job with no [model] section and no [train] model: the directory decides.
cat > job.ini <<'INI'
[distributed]
strategy = ddp
[train]
dataset = fortunes
batch_size = 4
seq_len = 64
eval_every = 0
sample_tokens = 0
[logging]
progress = off
INI
PROMPT="What is"

"$PY" "$ORACLE" make llama || fail "transformers could not make a Llama"
mpi 2 "$MPIACCEL" train --config job.ini model.init_from="$WORK/llama" train.max_steps=1 optimizer.lr=1e-30 \
  checkpoint.dir=llama_run logging.metrics_file=llama.jsonl > llama.out 2>&1 \
  || { cat llama.out; fail "a job naming no model, from a transformers Llama"; }
expect_contains llama.out "[model] init_from: from $WORK/llama/config.json: train.model = llama, model.n_layer = 2"
expect_contains llama.out "model.n_kv_head = 2"
expect_contains llama.out "model.rope_scaling = llama3"
[ "$(grep -c 'init_from: from' llama.out)" = 1 ] || fail "the taken keys are logged more than once"
"$MPIACCEL" generate --checkpoint llama_run --prompt "$PROMPT" --max-new 1 --logits run.npy > /dev/null 2> run.err \
  || { cat run.err; fail "generate from the run"; }
"$PY" "$ORACLE" logits llama run.npy "$PROMPT" || fail "the run's Llama computes otherwise than transformers'"
"$MPIACCEL" ckpt export llama_run --format hf -o again > again.out 2>&1 || { cat again.out; fail "export"; }
"$PY" "$ORACLE" same llama again || fail "the round trip changed the weights"

# estimate-memory counts the directory's model, as train builds it.
"$MPIACCEL" estimate-memory --config job.ini model.init_from="$WORK/llama" --world 2 > estimate.out 2> estimate.err \
  || { cat estimate.out estimate.err; fail "estimate-memory of a Hugging Face directory"; }
expect_contains estimate.err "[model] init_from: from $WORK/llama/config.json: train.model = llama"
expect_contains estimate.out "Memory per rank for llama: 119,488 parameters"

"$MPIACCEL" generate --model llama --prompt "$PROMPT" --max-new 50 --greedy --ids --logits direct.npy \
  > direct_ids.txt 2> direct.err || { cat direct_ids.txt direct.err; fail "generate --model"; }
"$PY" "$ORACLE" check llama direct.npy direct_ids.txt "$PROMPT" || fail "generate --model computes otherwise"
mpi 2 "$MPIACCEL" generate --model llama --prompt "$PROMPT" --max-new 50 --greedy --ids distributed.strategy=fsdp \
  > fsdp_ids.txt 2> fsdp.err || { cat fsdp_ids.txt fsdp.err; fail "generate --model under FSDP at 2 ranks"; }
[ "$(tail -1 fsdp_ids.txt)" = "$(tail -1 direct_ids.txt)" ] || fail "FSDP at 2 ranks generated other tokens"

"$PY" - <<'PY' || fail "transformers could not write a GPT-2"
import torch
from transformers import GPT2Config, GPT2LMHeadModel
torch.manual_seed(3)
config = GPT2Config(vocab_size=256, n_positions=48, n_embd=64, n_layer=3, n_head=8,
                    activation_function="gelu_new", resid_pdrop=0, embd_pdrop=0, attn_pdrop=0)
model = GPT2LMHeadModel(config)
with torch.no_grad():
    for p in model.parameters():
        p.normal_(0, 0.3)
model.save_pretrained("gpt2")
PY
"$MPIACCEL" generate --model gpt2 --prompt "$PROMPT" --max-new 1 --logits gpt2.npy > gpt2.out 2>&1 \
  || { cat gpt2.out; fail "generate --model from a transformers GPT-2"; }
expect_contains gpt2.out "train.model = gpt, model.n_layer = 3, model.n_head = 8, model.n_embd = 64"
expect_contains gpt2.out "train.seq_len = 48, model.activation = gelu_tanh"
"$PY" - "$PROMPT" <<'PY' || fail "the GPT built from config.json computes otherwise than transformers'"
import sys
import numpy as np
import torch
from transformers import GPT2LMHeadModel
model = GPT2LMHeadModel.from_pretrained("gpt2").eval()
with torch.no_grad():
    theirs = model(torch.tensor([list(sys.argv[1].encode())])).logits[0].numpy()
ours = np.load("gpt2.npy")
worst = float(np.abs(theirs - ours).max())
print(f"GPT-2: max |logits - ours| = {worst:.2e} over {theirs.shape}")
assert theirs.shape == ours.shape and worst <= 1e-5, worst
PY

# Refusals: one line naming the file's field and our key, before any step.
if mpi 2 "$MPIACCEL" train --config job.ini model.init_from="$WORK/llama" model.n_kv_head=4 train.max_steps=1 \
     checkpoint.dir=bad > bad.out 2>&1; then fail "a Llama of other kv heads was accepted"; fi
expect_contains bad.out "llama/config.json: num_key_value_heads = 2 but [model] n_kv_head gives 4"
if mpi 2 "$MPIACCEL" train --config job.ini model.init_from="$WORK/llama" train.model=gpt train.max_steps=1 \
     checkpoint.dir=bad_family > bad_family.out 2>&1; then fail "a GPT from a Llama directory was accepted"; fi
expect_contains bad_family.out "model_type llama is [train] model = llama, but command line sets [train] model = gpt"
# A file that sets every key (as `mpiaccel config` writes one): every disagreement in one line.
"$MPIACCEL" config --defaults -o full.ini > /dev/null 2>&1 || fail "mpiaccel config --defaults"
if mpi 2 "$MPIACCEL" train --config full.ini model.init_from="$WORK/llama" train.max_steps=1 \
     checkpoint.dir=bad_full > bad_full.out 2>&1; then fail "a full default config against a Llama was accepted"; fi
expect_contains bad_full.out "model_type llama is [train] model = llama, but full.ini:"
expect_contains bad_full.out "; num_hidden_layers = 2 but [model] n_layer gives 4 (full.ini:"
expect_contains bad_full.out "; hidden_size = 64 but [model] n_embd gives 128 (full.ini:"
expect_contains bad_full.out "leave these keys out to take the file's values, or set them to the file's"
[ "$(grep -c 'leave these keys out' bad_full.out)" = 1 ] || fail "the disagreements are not one line"
if "$MPIACCEL" generate --model gpt2 model.n_head=4 > bad_heads.out 2>&1; then fail "other GPT-2 heads were accepted"; fi
expect_contains bad_heads.out "gpt2/config.json: n_head = 8 but [model] n_head gives 4"
sed 's/"gelu_new"/"relu"/' gpt2/config.json > gpt2/config.relu && mv gpt2/config.relu gpt2/config.json
if "$MPIACCEL" generate --model gpt2 > bad_act.out 2>&1; then fail "a relu GPT-2 was accepted"; fi
expect_contains bad_act.out "activation_function \"relu\" is not one the GPT here computes"
[ ! -e bad/latest ] && [ ! -e bad_family/latest ] || fail "a refused run wrote a checkpoint"
echo PASS
