// The Llama's parameters and activations in closed form (llama.hpp);
// mirrors llama.cpp layer by layer. tests/unit/test_estimate.cpp checks the
// parameters against a built model.

#include "models/families/llama/llama.hpp"

#include <vector>

#include "models/split_rows.hpp"

namespace mpiaccel::detail {
namespace {

// One LlamaDecoderLayer as a rank of `t` holds it: q, k, v, o, gate, up,
// down, then the two norms (key/value heads whole when fewer than ranks).
int64_t add_decoder_layer(std::vector<ParamRows>& tensors, const ModelSpec& spec, int64_t t) {
  using detail::LinearSplit;
  const int64_t c = spec.n_embd, q = spec.n_head * spec.head_width(), kv = spec.kv_heads() * spec.head_width();
  const int64_t width = spec.swiglu_width();
  const bool attention_bias = spec.attention_bias, mlp_bias = spec.mlp_bias;
  const LinearSplit kv_split = spec.kv_heads() >= t ? LinearSplit::Colwise : LinearSplit::Whole;
  int64_t n = add_split_linear(tensors, c, q, attention_bias, LinearSplit::Colwise, t);
  n += add_split_linear(tensors, c, kv, attention_bias, kv_split, t);
  n += add_split_linear(tensors, c, kv, attention_bias, kv_split, t);
  n += add_split_linear(tensors, q, c, attention_bias, LinearSplit::Rowwise, t);
  n += add_split_linear(tensors, c, width, mlp_bias, LinearSplit::Colwise, t);
  n += add_split_linear(tensors, c, width, mlp_bias, LinearSplit::Colwise, t);
  n += add_split_linear(tensors, width, c, mlp_bias, LinearSplit::Rowwise, t);
  tensors.push_back({c, 1});
  tensors.push_back({c, 1});
  return n + 2 * c;
}

// The sizes tensor parallelism over `tp` ranks must divide, as llama.cpp
// checks them.
void check_tensor_parallel(const ModelSpec& spec, int64_t tp) {
  check_tp_divides(spec.n_head, "n_head", tp);
  check_tp_divides(spec.vocab_size, "vocab_size", tp);
  check_tp_divides(spec.swiglu_width(), "intermediate_size", tp);
  MPIACCEL_CHECK(spec.kv_heads() % tp == 0 || tp % spec.kv_heads() == 0,
                 "estimate-memory: [model] n_kv_head " + std::to_string(spec.kv_heads()) +
                     " and [parallelism] tp_size " + std::to_string(tp) + ": one must divide the other");
}

}  // namespace

ModelFootprint llama_footprint(const ModelSpec& spec, int64_t tp) {
  check_tensor_parallel(spec, tp);
  ModelFootprint out;
  const int64_t c = spec.n_embd, v = spec.vocab_size / tp;  // vocabulary rows split
  out.tensors = {{v, c}};
  for (int64_t l = 0; l < spec.n_layer; ++l) out.largest_unit_params = add_decoder_layer(out.tensors, spec, tp);
  out.tensors.push_back({c, 1});  // model.norm
  out.root_params = v * c + c;
  if (!spec.tie_word_embeddings) {
    out.tensors.push_back({v, c});  // lm_head
    out.root_params += v * c;
  }
  out.units = spec.n_layer;
  out.params = out.root_params + spec.n_layer * out.largest_unit_params;
  return out;
}

// Per layer, what autograd keeps (a = element bytes, b·t positions):
// each norm's input (a) and its float32 product (4) per channel; the shared
// input of q, k, v; q and k before the rotation; the fused attention's q and
// the repeated k, v, its output and o_proj's input (5 × heads·head width) and
// float32 log-sum-exp per head; the MLP's input, gate output, silu output,
// up output and down's input (4 × SwiGLU width).
// Under tensor parallelism over t ranks the heads' and the MLP's tensors are
// a rank's share (1/t; key/value heads whole when fewer than ranks), the
// norms and the regions' shared inputs whole, or with sequence parallelism
// the norms 1/t too.
int64_t llama_activation_bytes(const ModelSpec& spec, int64_t batch, int64_t a, bool checkpointing, int64_t tp,
                               bool sequence_parallel) {
  const int64_t bt = batch * spec.block_size, c = spec.n_embd, t = tp;
  const int64_t q = spec.n_head * spec.head_width() / t;
  const int64_t kv = spec.kv_heads() * spec.head_width() / (spec.kv_heads() >= t ? t : 1);
  const int64_t sharded = sequence_parallel ? t : 1;
  const int64_t norms = 2 * bt * c * (a + kFp32) / sharded;
  const int64_t attention = a * bt * (c + q + kv + 5 * q) + kFp32 * batch * spec.n_head / t * spec.block_size;
  const int64_t mlp = a * bt * (c + 4 * spec.swiglu_width() / t);
  const int64_t layer = norms + attention + mlp;
  // Final norm, head input and the float32 log-softmax of the loss (this
  // rank's vocabulary slice).
  const int64_t head = bt * c * (a + kFp32) / sharded + a * bt * c + kFp32 * bt * spec.vocab_size / t;
  if (!checkpointing) return spec.n_layer * layer + head;
  return spec.n_layer * bt * c * a / sharded + layer + head;
}

}  // namespace mpiaccel::detail
