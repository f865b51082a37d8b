// The Llama family's registration (include/mpiaccel/model_family.hpp).

#include "models/families/llama/llama.hpp"
#include "models/hf_architecture.hpp"

namespace mpiaccel::detail {

const ModelFamily& llama_family() {
  static const ModelFamily family{
      "llama",
      "a Llama decoder (rotary positions, RMSNorm, SwiGLU, grouped-query attention)",
      ModelFamily::Input::Tokens,
      {"LlamaDecoderLayer"},
      &make_llama,
      &llama_tensor_split,
      &llama_check_tensor_parallel,
      &llama_activation_bytes,
      // embed_tokens | norm (+ lm_head, or embed_tokens again when tied)
      [](const ModelSpec& spec) {
        return PipelinePieceTensors{1, spec.tie_word_embeddings ? size_t{1} : size_t{2}, spec.tie_word_embeddings};
      },
      &kHfLlama,
  };
  return family;
}

}  // namespace mpiaccel::detail
