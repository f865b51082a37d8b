#pragma once
// The GPT family's parts (gpt_family.cpp registers them): the model
// (gpt.cpp), its split and activations for estimate-memory (gpt_shapes.cpp) and its GPT-2 form
// in transformers (hf_gpt2.cpp).

#include <cstdint>
#include <memory>
#include <string>

#include "mpiaccel/model_family.hpp"

namespace mpiaccel::detail {

struct HfArchitecture;

std::shared_ptr<Model> make_gpt(const ModelSpec& spec, const ModelInit& init);
TensorSplit gpt_tensor_split(const std::string& name, const ModelSpec& spec, int64_t tp);
void gpt_check_tensor_parallel(const ModelSpec& spec, int64_t tp);
int64_t gpt_activation_bytes(const ModelSpec& spec, int64_t batch, int64_t element_bytes, bool checkpointing,
                             int64_t tp, bool sequence_parallel);
/// GPT2LMHeadModel.
extern const HfArchitecture kHfGpt2;

}  // namespace mpiaccel::detail
