"""transformers' LlamaForCausalLM as the oracle of tests/scripts/test_hf_llama.sh.

  make DIR                  a small random Llama (GQA, llama3 rope, biases,
                            untied head), saved with save_pretrained
  check DIR OURS.npy IDS PROMPT
                            its logits on PROMPT's bytes equal OURS.npy within
                            1e-5, and its 50 greedy tokens equal IDS (a file
                            of ids, one line)
  logits DIR OURS.npy PROMPT
                            the logits only
  same DIR_A DIR_B          the two directories' safetensors are bit-identical
  drop DIR OUT NAME         a copy of DIR without tensor NAME
  tokenizer DIR TEXT IDS    AutoTokenizer of DIR encodes TEXT to IDS and
                            decodes them back to TEXT
"""
import json
import shutil
import sys

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

TOLERANCE = 1e-5


def make(directory):
    torch.manual_seed(7)
    config = LlamaConfig(
        vocab_size=256, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        rms_norm_eps=1e-5, attention_bias=True, tie_word_embeddings=False,
        rope_parameters={"rope_type": "llama3", "rope_theta": 20000.0, "factor": 8.0,
                         "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 32},
        bos_token_id=None, eos_token_id=None, pad_token_id=None)
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        # Wide weights, so the greedy continuation is not one repeated token;
        # norms away from one, so their weights are tested.
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1 + 0.2 * torch.randn_like(p))
            else:
                p.normal_(0, 0.3)
    model.save_pretrained(directory)
    print(f"{directory}: a LlamaForCausalLM of {sum(p.numel() for p in model.parameters())} parameters")


def prompt_ids(prompt):
    return torch.tensor([list(prompt.encode())])


def check_logits(directory, ours_file, prompt):
    model = LlamaForCausalLM.from_pretrained(directory).eval()
    ids = prompt_ids(prompt)
    with torch.no_grad():
        logits = model(ids).logits[0].numpy()
    ours = np.load(ours_file)
    worst = float(np.abs(logits - ours).max())
    print(f"{directory}: max |logits - ours| = {worst:.2e} over {logits.shape}")
    assert logits.shape == ours.shape and worst <= TOLERANCE, worst
    return model, ids


def check(directory, ours_file, ids_file, prompt):
    model, ids = check_logits(directory, ours_file, prompt)
    out = model.generate(ids, max_new_tokens=50, do_sample=False, pad_token_id=0)[0][ids.shape[1]:].tolist()
    ours = [int(t) for t in open(ids_file).read().split()]
    assert out == ours, (out, ours)
    assert len(set(out)) > 5, f"a degenerate continuation proves little: {out}"
    print(f"50 greedy tokens from transformers equal ours: {out[:10]} ...")


def same(a, b):
    x, y = load_file(f"{a}/model.safetensors"), load_file(f"{b}/model.safetensors")
    assert sorted(x) == sorted(y), (sorted(x), sorted(y))
    for name in x:
        assert x[name].dtype == y[name].dtype and torch.equal(x[name], y[name]), name
    print(f"{len(x)} tensors bit-identical")


def drop(directory, out, name):
    shutil.copytree(directory, out, dirs_exist_ok=True)
    tensors = load_file(f"{directory}/model.safetensors")
    del tensors[name]
    save_file(tensors, f"{out}/model.safetensors", metadata={"format": "pt"})


def tokenizer(directory, text_file, ids_file):
    tok = AutoTokenizer.from_pretrained(directory)
    text = open(text_file, encoding="utf-8").read()
    theirs = tok.encode(text, add_special_tokens=False)
    ours = [int(t) for t in open(ids_file).read().split()]
    first = next((i for i, (a, b) in enumerate(zip(theirs, ours)) if a != b), None)
    assert theirs == ours, f"{type(tok).__name__}: first difference at {first}: theirs {theirs[first:first + 8]}" \
                           f" ours {ours[first:first + 8]} ({len(theirs)} against {len(ours)} ids)"
    assert tok.decode(theirs) == text, "AutoTokenizer does not decode the ids back to the text"
    print(f"AutoTokenizer ({type(tok).__name__}): {len(ours)} ids of {len(text)} characters equal ours")


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    {"make": make, "check": check, "logits": check_logits, "same": same, "drop": drop,
     "tokenizer": tokenizer}[command](*args)
