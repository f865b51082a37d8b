// The Llama's footprint in closed form (see llama_footprint.hpp).

#include "estimate/llama_footprint.hpp"

#include <vector>

namespace mpiaccel::detail {
namespace {

constexpr int64_t kFp32 = 4;

// A Linear [out, in] and, with `bias`, its bias [out]: appended as
// registered; returns the elements.
int64_t add_linear(std::vector<ParamRows>& tensors, int64_t in, int64_t out, bool bias) {
  tensors.push_back({out, in});
  if (bias) tensors.push_back({out, 1});
  return in * out + (bias ? out : 0);
}

// One LlamaDecoderLayer: q, k, v, o, gate, up, down, then the two norms.
int64_t add_decoder_layer(std::vector<ParamRows>& tensors, const ModelSpec& spec) {
  const int64_t c = spec.n_embd, q = spec.n_head * spec.head_width(), kv = spec.kv_heads() * spec.head_width();
  const int64_t width = spec.swiglu_width();
  int64_t n = add_linear(tensors, c, q, spec.attention_bias);
  n += add_linear(tensors, c, kv, spec.attention_bias);
  n += add_linear(tensors, c, kv, spec.attention_bias);
  n += add_linear(tensors, q, c, spec.attention_bias);
  n += add_linear(tensors, c, width, spec.mlp_bias) + add_linear(tensors, c, width, spec.mlp_bias);
  n += add_linear(tensors, width, c, spec.mlp_bias);
  tensors.push_back({c, 1});
  tensors.push_back({c, 1});
  return n + 2 * c;
}

}  // namespace

void llama_footprint(const ModelSpec& spec, ModelFootprint& out) {
  const int64_t c = spec.n_embd, v = spec.vocab_size;
  out.tensors = {{v, c}};
  for (int64_t l = 0; l < spec.n_layer; ++l) out.largest_unit_params = add_decoder_layer(out.tensors, spec);
  out.tensors.push_back({c, 1});  // model.norm
  out.root_params = v * c + c;
  if (!spec.tie_word_embeddings) {
    out.tensors.push_back({v, c});  // lm_head
    out.root_params += v * c;
  }
  out.units = spec.n_layer;
  out.params = out.root_params + spec.n_layer * out.largest_unit_params;
}

// Per layer, what autograd keeps (a = element bytes, b·t positions):
// each norm's input (a) and its float32 product (4) per channel; the shared
// input of q, k, v; q and k before the rotation; the fused attention's q and
// the repeated k, v, its output and o_proj's input (5 × heads·head width) and
// float32 log-sum-exp per head; the MLP's input, gate output, silu output,
// up output and down's input (4 × SwiGLU width).
int64_t llama_activation_bytes(const ModelSpec& spec, int64_t batch, int64_t a, bool checkpointing) {
  const int64_t bt = batch * spec.block_size, c = spec.n_embd;
  const int64_t q = spec.n_head * spec.head_width(), kv = spec.kv_heads() * spec.head_width();
  const int64_t norms = 2 * bt * c * (a + kFp32);
  const int64_t attention = a * bt * (c + q + kv + 5 * q) + kFp32 * batch * spec.n_head * spec.block_size;
  const int64_t mlp = a * bt * (c + 4 * spec.swiglu_width());
  const int64_t layer = norms + attention + mlp;
  // Final norm, head input and the float32 log-softmax of the loss.
  const int64_t head = bt * c * (a + kFp32) + a * bt * c + kFp32 * bt * spec.vocab_size;
  if (!checkpointing) return spec.n_layer * layer + head;
  return spec.n_layer * bt * c * a + layer + head;
}

}  // namespace mpiaccel::detail
