# ctest: timeout 300
# The Hugging Face world reads what mpiaccel writes, and mpiaccel reads
# theirs, checked with transformers and safetensors from the project's
# virtual environment (make deps installs them):
#  - a GPT trained here with [model] activation = gelu_tanh (GPT-2's
#    gelu_new), exported with `mpiaccel ckpt export --format hf`, loads in
#    transformers.GPT2LMHeadModel.from_pretrained as it is: its logits on a
#    prompt equal ours (`mpiaccel generate --logits`) within 1e-4, and 50
#    greedy tokens from transformers equal `mpiaccel generate --greedy`
#    (which gives the same text under FSDP at 2 ranks);
#  - exported in shards (--max-shard-size) with model.safetensors.index.json,
#    it loads the same;
#  - a GPT-2 made by transformers (save_pretrained) starts a run here
#    ([model] init_from) and, exported again after one step at lr 1e-30 (an
#    update below fp32's resolution of every weight: they are all drawn from
#    N(0, 0.02), none zero), is bit-identical to what transformers wrote;
#  - an init_from model of another shape fails with one line naming the
#    tensor and both shapes;
#  - init_from files whose safetensors header lies (a length past the end, a
#    tensor's bytes outside the file or overlapping another's, a shape that
#    claims 2^62 elements, a truncated file) fail the run at once with one
#    line naming the file and the lie, and write no checkpoint.
source "$(dirname "$0")/lib.sh" "$1"

PY=$SOURCE_DIR/.venv/bin/python
"$PY" -c 'import transformers, safetensors' 2> /dev/null \
  || fail "$PY cannot import transformers and safetensors: run make deps (requirements-torch.txt)"

GPT=(--config "$SOURCE_DIR/jobs/fortunes-gpt.ini" train.seq_len=64 model.n_layer=2 model.n_head=4
     model.n_embd=64 model.activation=gelu_tanh train.eval_every=0 train.sample_tokens=0
     logging.progress=off checkpoint.save_at_end=true)
mpi 2 "$MPIACCEL" train "${GPT[@]}" train.max_steps=150 checkpoint.dir=trained \
  logging.metrics_file=trained.jsonl > train.out 2>&1 || { cat train.out; fail "training"; }

"$MPIACCEL" ckpt export trained --format hf -o hf > export.out 2>&1 || { cat export.out; fail "export --format hf"; }
for file in model.safetensors config.json; do expect_contains export.out "hf/$file"; done
"$MPIACCEL" ckpt export trained --format hf -o hf_sharded --max-shard-size 100000 > sharded.out 2>&1 \
  || { cat sharded.out; fail "sharded export"; }
expect_contains sharded.out "model.safetensors.index.json"
expect_contains sharded.out "model-00001-of-"

PROMPT="What is"
"$MPIACCEL" generate --checkpoint trained --prompt "$PROMPT" --max-new 50 --greedy --logits ours.npy \
  > generate.out 2> generate.err || { cat generate.out generate.err; fail "mpiaccel generate"; }
# The same text at another world size and strategy.
mpi 2 "$MPIACCEL" generate --checkpoint trained --prompt "$PROMPT" --max-new 50 --greedy \
  distributed.strategy=fsdp > fsdp.out 2> fsdp.err || { cat fsdp.out fsdp.err; fail "mpiaccel generate under FSDP at 2 ranks"; }
[ "$(tail -c 200 fsdp.out)" = "$(tail -c 200 generate.out)" ] || fail "FSDP at 2 ranks generated other text"
"$PY" - "$PROMPT" <<'PY' || fail "transformers does not compute what mpiaccel computes"
import json, sys
import numpy as np
import torch
from transformers import GPT2LMHeadModel

prompt = sys.argv[1]
ids = torch.tensor([list(prompt.encode())])
ours = np.load("ours.npy")
text = open("generate.out", "rb").read().decode()
continuation = text[text.rindex(prompt) + len(prompt):].rstrip("\n")
for directory in ("hf", "hf_sharded"):
    model = GPT2LMHeadModel.from_pretrained(directory).eval()
    assert model.config.activation_function == "gelu_new", model.config
    with torch.no_grad():
        logits = model(ids).logits[0].numpy()
    worst = float(np.abs(logits - ours).max())
    print(f"{directory}: max |logits - ours| = {worst:.2e} over {logits.shape}")
    assert logits.shape == ours.shape and worst <= 1e-4
    out = model.generate(ids, max_new_tokens=50, do_sample=False, pad_token_id=0)[0][ids.shape[1]:]
    theirs = "".join(chr(b) if b in (9, 10) or 32 <= b < 127 else "?" for b in out.tolist())
    assert theirs == continuation, (theirs, continuation)
assert len(set(continuation)) > 3, f"a degenerate continuation proves little: {continuation!r}"
print("50 greedy tokens from transformers equal mpiaccel generate's:", repr(continuation[:40]), "...")
PY

# transformers' GPT-2 -> init_from -> a step at lr 0 -> exported: the same bits.
"$PY" - <<'PY' || fail "transformers could not write a GPT-2"
import torch
from transformers import GPT2Config, GPT2LMHeadModel
torch.manual_seed(3)
config = GPT2Config(vocab_size=256, n_positions=64, n_embd=64, n_layer=2, n_head=4,
                    activation_function="gelu_new", resid_pdrop=0, embd_pdrop=0, attn_pdrop=0,
                    bos_token_id=0, eos_token_id=0)
model = GPT2LMHeadModel(config)
with torch.no_grad():
    for p in model.parameters():
        p.normal_(0, 0.02)
model.save_pretrained("theirs")
PY
mpi 2 "$MPIACCEL" train "${GPT[@]}" model.init_from="$WORK/theirs" train.max_steps=1 optimizer.lr=1e-30 \
  checkpoint.dir=imported logging.metrics_file=imported.jsonl > import.out 2>&1 \
  || { cat import.out; fail "init_from a transformers GPT-2"; }
expect_contains import.out "initialised from the pretrained model $WORK/theirs"
"$MPIACCEL" ckpt export imported --format hf -o again > again.out 2>&1 || { cat again.out; fail "export again"; }
"$PY" - <<'PY' || fail "the round trip changed the weights"
import torch
from safetensors.torch import load_file
theirs, again = load_file("theirs/model.safetensors"), load_file("again/model.safetensors")
strip = lambda k: k[len("transformer."):] if k.startswith("transformer.") else k
theirs = {strip(k): v for k, v in theirs.items() if not k.startswith("lm_head")}
again = {strip(k): v for k, v in again.items()}
assert sorted(theirs) == sorted(again), (sorted(theirs), sorted(again))
for name in theirs:
    assert theirs[name].dtype == again[name].dtype and torch.equal(theirs[name], again[name]), name
print(f"{len(theirs)} tensors imported and exported again: bit-identical")
PY

if mpi 2 "$MPIACCEL" train "${GPT[@]}" model.init_from="$WORK/theirs" model.n_embd=32 train.max_steps=1 \
     checkpoint.dir=bad > bad.out 2>&1; then fail "a model of another shape was accepted"; fi
expect_contains bad.out "does not fit"
expect_contains bad.out "set [model] n_layer, n_embd, vocab_size and [train] seq_len to the file's"

# Lying headers, each in a copy of theirs/ (config.json as it is).
"$PY" - <<'PY' || fail "could not write the lying files"
import json, os, shutil, struct
with open("theirs/model.safetensors", "rb") as f:
    raw = f.read()
n = struct.unpack("<Q", raw[:8])[0]
header, data = json.loads(raw[8:8 + n]), raw[8 + n:]
names = [k for k in header if k != "__metadata__"]
def write(tag, header, data, length=None):
    shutil.copytree("theirs", f"lie_{tag}", dirs_exist_ok=True)
    text = json.dumps(header).encode()
    with open(f"lie_{tag}/model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(text) if length is None else length) + text + data)
write("length", header, data, length=1 << 40)
h = json.loads(json.dumps(header)); h[names[0]]["data_offsets"][1] = len(data) + 4096
write("outside", h, data)
twin = next(k for k in names[1:] if (header[k]["shape"], header[k]["dtype"]) ==
            (header[names[0]]["shape"], header[names[0]]["dtype"]))
h = json.loads(json.dumps(header)); h[twin]["data_offsets"] = h[names[0]]["data_offsets"]
write("overlap", h, data)
h = json.loads(json.dumps(header)); h[names[0]]["shape"] = [1 << 31, 1 << 31]
write("shape", h, data)
write("truncated", header, data[: len(data) // 2])
PY
declare -A SAYS=([length]="its header claims 1099511627776 bytes" [outside]="outside the"
                 [overlap]="overlap" [shape]="needs another number" [truncated]="outside the")
for lie in length outside overlap shape truncated; do
  rc=0
  mpi --timeout 120 2 "$MPIACCEL" train "${GPT[@]}" \
    model.init_from="$WORK/lie_$lie" train.max_steps=1 checkpoint.dir="lie_$lie.ckpt" > "lie_$lie.out" 2>&1 || rc=$?
  [ $rc -ne 0 ] || fail "init_from a safetensors file whose header lies ($lie) was accepted"
  [ $rc -ne 124 ] || fail "init_from lie_$lie hung"
  expect_contains "lie_$lie.out" "lie_$lie/model.safetensors is not a valid safetensors file"
  expect_contains "lie_$lie.out" "${SAYS[$lie]}"
  [ ! -e "lie_$lie.ckpt/latest" ] || fail "a run from a lying file ($lie) wrote a checkpoint"
  echo "lie_$lie: $(grep -m1 'not a valid safetensors' "lie_$lie.out")"
done
echo PASS
