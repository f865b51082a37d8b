// What estimate-memory needs of the Llama beyond a shape-only build
// (llama.hpp): its tensor-parallel split per parameter and its activations
// in closed form, mirroring llama.cpp layer by layer.

#include "models/families/llama/llama.hpp"

#include <initializer_list>
#include <string>

#include "models/family_shapes.hpp"

namespace mpiaccel::detail {

// The sizes tensor parallelism over `tp` ranks must divide, as llama.cpp
// checks them.
void llama_check_tensor_parallel(const ModelSpec& spec, int64_t tp) {
  check_tp_divides(spec.n_head, "n_head", tp);
  check_tp_divides(spec.vocab_size, "vocab_size", tp);
  check_tp_divides(spec.swiglu_width(), "intermediate_size", tp);
  MPIACCEL_CHECK(spec.kv_heads() % tp == 0 || tp % spec.kv_heads() == 0,
                 "estimate-memory: [model] n_kv_head " + std::to_string(spec.kv_heads()) +
                     " and [parallelism] tp_size " + std::to_string(tp) + ": one must divide the other");
}

// llama.cpp's parallelize: the vocabulary (embedding and head) by rows, the
// attention heads and the SwiGLU width by rows of q, k, v, gate and up and
// columns of o and down; key/value heads whole when fewer than the ranks;
// norms and the row-parallel biases whole.
TensorSplit llama_tensor_split(const std::string& name, const ModelSpec& spec, int64_t tp) {
  if (name == "model.embed_tokens.weight" || name == "lm_head.weight") return TensorSplit::Rows;
  if (ends_with_any(name, {".q_proj.weight", ".q_proj.bias", ".gate_proj.weight", ".gate_proj.bias",
                           ".up_proj.weight", ".up_proj.bias"}))
    return TensorSplit::Rows;
  if (ends_with_any(name, {".k_proj.weight", ".k_proj.bias", ".v_proj.weight", ".v_proj.bias"}))
    return spec.kv_heads() >= tp ? TensorSplit::Rows : TensorSplit::Whole;
  if (ends_with_any(name, {".o_proj.weight", ".down_proj.weight"})) return TensorSplit::Columns;
  return TensorSplit::Whole;
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
