# ctest: timeout 600
# The Llama to and from the Hugging Face world, with transformers in the
# project's .venv as the oracle (tests/python/llama_oracle.py):
#  - a random LlamaForCausalLM made by transformers (grouped-query attention,
#    Llama 3.1 rotary scaling, biases, an untied head) starts a run here
#    ([model] init_from) and, after one step at lr 1e-30, `mpiaccel generate`
#    gives its logits within 1e-5 of transformers' and its 50 greedy tokens
#    equal theirs, at np 1 and under FSDP at np 2;
#  - exported again (`ckpt export --format hf`), the weights are bit-identical
#    to what transformers wrote;
#  - trained 20 steps and exported, transformers reads it back with logits
#    within 1e-5 of ours;
#  - a run on BPE tokens exports its tokenizer: AutoTokenizer loads the
#    directory and encodes a text to the ids `mpiaccel data encode` gives,
#    and the tied-head model loads in LlamaForCausalLM;
#  - a config.json that disagrees with [model] and a missing tensor are
#    refused by name.
source "$(dirname "$0")/lib.sh" "$1"

PY=$SOURCE_DIR/.venv/bin/python
ORACLE=$SOURCE_DIR/tests/python/llama_oracle.py
"$PY" -c 'import transformers, safetensors' 2> /dev/null \
  || fail "$PY cannot import transformers and safetensors: run make deps (requirements-torch.txt)"

LLAMA=(--config "$SOURCE_DIR/jobs/fortunes-gpt.ini" train.model=llama train.seq_len=64 model.n_layer=2
       model.n_head=4 model.n_kv_head=2 model.n_embd=64 model.intermediate_size=160 model.rope_theta=20000
       model.rope_scaling=llama3 model.rope_original_max_positions=32 model.attention_bias=true
       train.eval_every=0 train.sample_tokens=0 logging.progress=off checkpoint.save_at_end=true)
PROMPT="What is"

"$PY" "$ORACLE" make theirs || fail "transformers could not make a Llama"
mpi 2 "$MPIACCEL" train "${LLAMA[@]}" model.init_from="$WORK/theirs" train.max_steps=1 optimizer.lr=1e-30 \
  checkpoint.dir=imported logging.metrics_file=imported.jsonl > import.out 2>&1 \
  || { cat import.out; fail "init_from a transformers Llama"; }
expect_contains import.out "initialised from the pretrained model $WORK/theirs"

"$MPIACCEL" generate --checkpoint imported --prompt "$PROMPT" --max-new 50 --greedy --ids --logits ours.npy \
  > ids.txt 2> generate.err || { cat ids.txt generate.err; fail "mpiaccel generate"; }
mpi 2 "$MPIACCEL" generate --checkpoint imported --prompt "$PROMPT" --max-new 50 --greedy --ids \
  distributed.strategy=fsdp > fsdp_ids.txt 2> fsdp_ids.err || { cat fsdp_ids.txt fsdp_ids.err; fail "mpiaccel generate under FSDP at 2 ranks"; }
[ "$(tail -1 fsdp_ids.txt)" = "$(tail -1 ids.txt)" ] || fail "FSDP at 2 ranks generated other tokens"
"$PY" "$ORACLE" check theirs ours.npy ids.txt "$PROMPT" || fail "transformers does not compute what mpiaccel computes"

"$MPIACCEL" ckpt export imported --format hf -o again > again.out 2>&1 || { cat again.out; fail "export"; }
"$PY" "$ORACLE" same theirs again || fail "the round trip changed the weights"

mpi 2 "$MPIACCEL" train "${LLAMA[@]}" model.init_from="$WORK/theirs" train.max_steps=20 checkpoint.dir=trained \
  logging.metrics_file=trained.jsonl > trained.out 2>&1 || { cat trained.out; fail "training from the Llama"; }
"$MPIACCEL" ckpt export trained --format hf -o trained_hf > export.out 2>&1 || { cat export.out; fail "export"; }
"$MPIACCEL" generate --checkpoint trained --prompt "$PROMPT" --max-new 1 --logits trained.npy > /dev/null 2>&1 \
  || fail "generate from the trained Llama"
"$PY" "$ORACLE" logits trained_hf trained.npy "$PROMPT" || fail "transformers reads our trained Llama otherwise"

# A BPE run: the tokenizer goes with the model.
mpi 2 "$MPIACCEL" train "${LLAMA[@]}" train.dataset=tokens train.data_dir=bpe \
  train.tokenize_from=/usr/share/games/fortunes model.tie_word_embeddings=true model.attention_bias=false \
  train.max_steps=2 checkpoint.dir=bpe_run logging.metrics_file=bpe.jsonl > bpe.out 2>&1 \
  || { cat bpe.out; fail "a Llama on BPE tokens"; }
"$MPIACCEL" ckpt export bpe_run --format hf -o bpe_hf > bpe_export.out 2>&1 || { cat bpe_export.out; fail "export"; }
for file in tokenizer.json tokenizer_config.json tokenizer.model; do expect_contains bpe_export.out "bpe_hf/$file"; done
{ head -c 6000 /usr/share/games/fortunes/fortunes; printf 'Tabs\tand  double  spaces, digits 31415, caf\xc3\xa9, \xe2\x82\xac, \xf0\x9f\x98\x80.\n'; } > sample.txt
"$MPIACCEL" data encode --model bpe_hf/tokenizer.model < sample.txt > sample.ids || fail "mpiaccel data encode"
"$PY" "$ORACLE" tokenizer bpe_hf sample.txt sample.ids || fail "AutoTokenizer encodes otherwise"
"$MPIACCEL" generate --checkpoint bpe_run --prompt "$PROMPT" --max-new 1 --logits bpe.npy > /dev/null 2>&1 \
  || fail "generate from the BPE Llama"
"$PY" "$ORACLE" logits bpe_hf bpe.npy "$PROMPT" || fail "transformers reads our tied BPE Llama otherwise"

# Refusals, by name, before any step.
if mpi 2 "$MPIACCEL" train "${LLAMA[@]}" model.init_from="$WORK/theirs" model.n_kv_head=4 train.max_steps=1 \
     checkpoint.dir=bad > bad.out 2>&1; then fail "a Llama of other kv heads was accepted"; fi
expect_contains bad.out "theirs/config.json: num_key_value_heads = 2 but [model] n_kv_head gives 4"
if mpi 2 "$MPIACCEL" train "${LLAMA[@]}" model.init_from="$WORK/theirs" model.rope_scaling=none train.max_steps=1 \
     checkpoint.dir=bad_rope > bad_rope.out 2>&1; then fail "a Llama of other rotary scaling was accepted"; fi
expect_contains bad_rope.out "rope_type = \"llama3\" but [model] rope_scaling gives \"default\""
"$PY" "$ORACLE" drop theirs missing model.layers.1.mlp.up_proj.weight || fail "could not drop a tensor"
if mpi 2 "$MPIACCEL" train "${LLAMA[@]}" model.init_from="$WORK/missing" train.max_steps=1 \
     checkpoint.dir=bad_missing > missing.out 2>&1; then fail "a Llama without a tensor was accepted"; fi
expect_contains missing.out "has no tensor for model.layers.1.mlp.up_proj.weight"
[ ! -e bad_missing/latest ] || fail "a refused run wrote a checkpoint"
echo PASS
