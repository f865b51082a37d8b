// What estimate-memory needs of the GPT beyond a shape-only build
// (gpt.hpp): its tensor-parallel split per parameter and its activations in
// closed form, mirroring gpt.cpp layer by layer.

#include "models/families/gpt/gpt.hpp"

#include <initializer_list>
#include <string>

#include "models/family_shapes.hpp"

namespace mpiaccel::detail {
namespace {

// Korthikanti et al. 2022, eq. (2)-(5): s·b·h·(34 + 5·a·s/h) bytes per layer
// for 2-byte activations and 1-byte dropout masks; with tensor parallelism
// over t ranks s·b·h·(10 + 24/t + 5·a·s/(h·t)) (the norms, dropout and
// residual inputs stay whole); with sequence parallelism all of it is /t.
int64_t gpt_layer_activations(const ModelSpec& spec, int64_t batch, int64_t element_bytes, int64_t tp,
                              bool sequence_parallel) {
  const int64_t b = batch, t = spec.block_size, c = spec.n_embd, h = spec.n_head;
  const int64_t whole = 10 * b * t * c, split = 24 * b * t * c + 5 * b * h * t * t;
  return ((sequence_parallel ? whole / tp : whole) + split / tp) * element_bytes / 2;
}

}  // namespace

// Megatron's split (gpt.cpp's parallelize): the vocabulary by rows, q, k and
// v by heads in their fused layer, the MLP's first layer by rows, the two
// output projections by columns; norms, positions and output biases whole.
TensorSplit gpt_tensor_split(const std::string& name, const ModelSpec&, int64_t) {
  if (name == "wte.weight") return TensorSplit::Rows;
  if (ends_with_any(name, {".attn.qkv.weight", ".attn.qkv.bias"})) return TensorSplit::Fused3;
  if (ends_with_any(name, {".mlp.fc.weight", ".mlp.fc.bias"})) return TensorSplit::Rows;
  if (ends_with_any(name, {".attn.proj.weight", ".mlp.proj.weight"})) return TensorSplit::Columns;
  return TensorSplit::Whole;
}

void gpt_check_tensor_parallel(const ModelSpec& spec, int64_t tp) {
  check_tp_divides(spec.n_head, "n_head", tp);
  check_tp_divides(spec.vocab_size, "vocab_size", tp);
}

int64_t gpt_activation_bytes(const ModelSpec& spec, int64_t b, int64_t a, bool checkpointing, int64_t tp,
                             bool sequence_parallel) {
  const int64_t t = spec.block_size, c = spec.n_embd;
  const int64_t layer = gpt_layer_activations(spec, b, a, tp, sequence_parallel);
  // Final norm and head input (4·s·b·h at 2 bytes) and the fp32 log-softmax
  // of the loss (4·s·b·v; this rank's vocabulary slice under tp).
  const int64_t head = 4 * b * t * c * a / 2 + kFp32 * b * t * spec.vocab_size / tp;
  const int64_t layer_input = b * t * c * a / (sequence_parallel ? tp : 1);
  if (!checkpointing) return spec.n_layer * layer + head;
  return spec.n_layer * layer_input + layer + head;
}

}  // namespace mpiaccel::detail
