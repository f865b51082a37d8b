#pragma once
// The Llama family's parts (llama_family.cpp registers them): the model
// (llama.cpp, rope.cpp), its split and activations for estimate-memory (llama_shapes.cpp) and
// its transformers form, LlamaForCausalLM (hf_llama.cpp).

#include <cstdint>
#include <memory>
#include <string>

#include "mpiaccel/model_family.hpp"

namespace mpiaccel::detail {

struct HfArchitecture;

std::shared_ptr<Model> make_llama(const ModelSpec& spec, const ModelInit& init);

/// How one of `tp` tensor-parallel ranks holds the Llama's parameter `name`.
TensorSplit llama_tensor_split(const std::string& name, const ModelSpec& spec, int64_t tp);
/// Throws Error naming the [model] key that `tp` ranks cannot split.
void llama_check_tensor_parallel(const ModelSpec& spec, int64_t tp);

/// Bytes of activations kept for backward by a Llama of `spec` at `batch`
/// sequences, activations of `element_bytes`, on one rank of `tp` (with or
/// without sequence parallelism).
int64_t llama_activation_bytes(const ModelSpec& spec, int64_t batch, int64_t element_bytes, bool checkpointing,
                               int64_t tp, bool sequence_parallel);

/// LlamaForCausalLM.
extern const HfArchitecture kHfLlama;

}  // namespace mpiaccel::detail
