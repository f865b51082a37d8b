// The GPT family's registration (include/mpiaccel/model_family.hpp).

#include "models/families/gpt/gpt.hpp"
#include "models/hf_architecture.hpp"

namespace mpiaccel::detail {

const ModelFamily& gpt_family() {
  static const ModelFamily family{
      "gpt",
      "a GPT-2-style decoder (learned positions, pre-LN, GELU, head tied to the embedding)",
      ModelFamily::Input::Tokens,
      {"DecoderLayer"},
      &make_gpt,
      &gpt_tensor_split,
      &gpt_check_tensor_parallel,
      &gpt_activation_bytes,
      // wte, wpe | ln_f weight and bias (+ wte again)
      [](const ModelSpec&) { return PipelinePieceTensors{2, 2, true}; },
      &kHfGpt2,
  };
  return family;
}

}  // namespace mpiaccel::detail
