// The GPT's parameters and activations in closed form (gpt.hpp); mirrors
// gpt.cpp layer by layer. tests/unit/test_estimate.cpp checks the
// parameters against a built model.

#include "models/families/gpt/gpt.hpp"

#include <vector>

#include "models/split_rows.hpp"

namespace mpiaccel::detail {
namespace {

void add_norm(std::vector<ParamRows>& tensors, int64_t c) {
  tensors.push_back({c, 1});  // weight
  tensors.push_back({c, 1});  // bias
}

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

ModelFootprint gpt_footprint(const ModelSpec& spec, int64_t tp) {
  check_tp_divides(spec.n_head, "n_head", tp);
  check_tp_divides(spec.vocab_size, "vocab_size", tp);
  ModelFootprint out;
  const int64_t c = spec.n_embd, t = tp;
  out.units = spec.n_layer;
  // wte (vocabulary rows split, tied with the head), wpe, ln_f.
  out.root_params = spec.vocab_size / t * c + spec.block_size * c + 2 * c;
  out.tensors = {{spec.vocab_size / t, c}, {spec.block_size, c}};
  for (int64_t l = 0; l < spec.n_layer; ++l) {
    int64_t layer = 4 * c;  // ln_1, ln_2
    add_norm(out.tensors, c);  // ln_1
    layer += add_split_linear(out.tensors, c, 3 * c, true, LinearSplit::Fused3, t);   // attn.qkv
    layer += add_split_linear(out.tensors, c, c, true, LinearSplit::Rowwise, t);      // attn.proj
    add_norm(out.tensors, c);  // ln_2
    layer += add_split_linear(out.tensors, c, 4 * c, true, LinearSplit::Colwise, t);  // mlp.fc
    layer += add_split_linear(out.tensors, 4 * c, c, true, LinearSplit::Rowwise, t);  // mlp.proj
    out.largest_unit_params = layer;
  }
  out.params = out.root_params + spec.n_layer * out.largest_unit_params;
  add_norm(out.tensors, c);  // ln_f
  return out;
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
