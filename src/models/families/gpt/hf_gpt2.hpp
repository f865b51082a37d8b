#pragma once
// The bundled GPT as Hugging Face's GPT2LMHeadModel names and lays out its
// tensors (transformers' modeling_gpt2.py): the same architecture, so a
// model moves between them by renaming and, for the linear layers, which
// GPT-2 keeps in Conv1D form ([in, out], the transpose of nn.Linear's
// weight), transposing.
//
//   ours                          GPT2LMHeadModel
//   wte.weight                    transformer.wte.weight        (lm_head.weight: tied to it)
//   wpe.weight                    transformer.wpe.weight
//   blocks.i.ln_1.{weight,bias}   transformer.h.i.ln_1.{weight,bias}
//   blocks.i.attn.qkv.*           transformer.h.i.attn.c_attn.*  (weight transposed)
//   blocks.i.attn.proj.*          transformer.h.i.attn.c_proj.*  (weight transposed)
//   blocks.i.ln_2.*               transformer.h.i.ln_2.*
//   blocks.i.mlp.fc.*             transformer.h.i.mlp.c_fc.*     (weight transposed)
//   blocks.i.mlp.proj.*           transformer.h.i.mlp.c_proj.*   (weight transposed)
//   ln_f.*                        transformer.ln_f.*
//
// Files written by GPT2Model, or from the hub, use the names without the
// "transformer." prefix; both are read. Older files also carry the causal
// mask buffers attn.bias and attn.masked_bias: not parameters, ignored.

#include <string>

#include "models/hf_architecture.hpp"

namespace mpiaccel::detail {

/// Hugging Face's name (with the "transformer." prefix) of our GPT tensor
/// `ours` ("blocks.3.mlp.fc.weight").
HfTensorName hf_gpt2_name(const std::string& ours);

/// Ours for Hugging Face's `hf` (prefixed or not); name "" for the tensors
/// we do not keep (the tied lm_head.weight, the attention mask buffers),
/// `unknown` set for a name that is not GPT-2's at all.
HfTensorName our_gpt_name(const std::string& hf, bool* unknown);

}  // namespace mpiaccel::detail
