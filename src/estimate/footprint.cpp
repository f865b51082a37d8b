// Parameter counts (closed form and counted) and activation estimates of the
// bundled models. The closed forms mirror src/models/*.cpp layer by layer;
// tests/unit/test_estimate.cpp checks them against count_footprint.

#include <torch/nn/module.h>

#include <algorithm>
#include <string>
#include <unordered_set>
#include <vector>

#include "estimate/llama_footprint.hpp"
#include "estimate/split_rows.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/estimate.hpp"

namespace mpiaccel {
namespace {

constexpr int64_t kPixels = 28 * 28;
constexpr int64_t kClasses = 10;
using detail::kFp32;

int64_t linear(int64_t in, int64_t out) { return in * out + out; }

// A Linear's weight [out, in] and bias [out], as registered.
void add_linear(std::vector<ParamRows>& tensors, int64_t in, int64_t out) {
  tensors.push_back({out, in});
  tensors.push_back({out, 1});
}
void add_vector(std::vector<ParamRows>& tensors, int64_t n) { tensors.push_back({n, 1}); }

// The sizes tensor parallelism over `tp` ranks must divide, as the models
// check them (models/gpt.cpp, llama.cpp).
void check_tensor_parallel(const std::string& kind, const ModelSpec& spec, int64_t tp) {
  MPIACCEL_CHECK(tp >= 1, "estimate-memory: tp_size must be at least 1");
  if (tp == 1) return;
  MPIACCEL_CHECK(kind == "gpt" || kind == "llama",
                 "estimate-memory: tensor parallelism splits the gpt and the llama, not a " + kind);
  auto divides = [&](int64_t value, const std::string& key) {
    MPIACCEL_CHECK(value % tp == 0, "estimate-memory: [model] " + key + " " + std::to_string(value) +
                                        " does not divide by [parallelism] tp_size " + std::to_string(tp));
  };
  divides(spec.n_head, "n_head");
  divides(spec.vocab_size, "vocab_size");
  if (kind != "llama") return;
  divides(spec.swiglu_width(), "intermediate_size");
  MPIACCEL_CHECK(spec.kv_heads() % tp == 0 || tp % spec.kv_heads() == 0,
                 "estimate-memory: [model] n_kv_head " + std::to_string(spec.kv_heads()) +
                     " and [parallelism] tp_size " + std::to_string(tp) + ": one must divide the other");
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

ModelFootprint model_footprint(const std::string& kind, const ModelSpec& spec, int64_t tp) {
  ModelFootprint out;
  out.kind = kind;
  check_tensor_parallel(kind, spec, tp);
  if (kind == "gpt") {
    const int64_t c = spec.n_embd, t = tp;
    out.units = spec.n_layer;
    // wte (vocabulary rows split, tied with the head), wpe, ln_f.
    out.root_params = spec.vocab_size / t * c + spec.block_size * c + 2 * c;
    out.tensors = {{spec.vocab_size / t, c}, {spec.block_size, c}};
    for (int64_t l = 0; l < spec.n_layer; ++l) {
      int64_t layer = 4 * c;  // ln_1, ln_2
      add_vector(out.tensors, c);  // ln_1
      add_vector(out.tensors, c);
      layer += detail::add_split_linear(out.tensors, c, 3 * c, true, detail::LinearSplit::Fused3, t);  // attn.qkv
      layer += detail::add_split_linear(out.tensors, c, c, true, detail::LinearSplit::Rowwise, t);     // attn.proj
      add_vector(out.tensors, c);  // ln_2
      add_vector(out.tensors, c);
      layer += detail::add_split_linear(out.tensors, c, 4 * c, true, detail::LinearSplit::Colwise, t);  // mlp.fc
      layer += detail::add_split_linear(out.tensors, 4 * c, c, true, detail::LinearSplit::Rowwise, t);  // mlp.proj
      out.largest_unit_params = layer;
    }
    out.params = out.root_params + spec.n_layer * out.largest_unit_params;
    add_vector(out.tensors, c);  // ln_f
    add_vector(out.tensors, c);
  } else if (kind == "llama") {
    detail::llama_footprint(spec, tp, out);
  } else if (kind == "mlp") {
    out.units = spec.mlp_layers;
    int64_t in = kPixels;
    for (int64_t i = 0; i < spec.mlp_layers; ++i) {
      const int64_t block = linear(in, spec.hidden_size);
      add_linear(out.tensors, in, spec.hidden_size);
      out.largest_unit_params = std::max(out.largest_unit_params, block);
      out.params += block;
      in = spec.hidden_size;
    }
    out.root_params = linear(spec.hidden_size, kClasses);
    out.params += out.root_params;
    add_linear(out.tensors, spec.hidden_size, kClasses);
  } else if (kind == "cnn") {
    // No units: FSDP treats the whole model as its root.
    out.params = (1 * 32 * 9 + 32) + (32 * 64 * 9 + 64) + linear(64 * 7 * 7, spec.hidden_size) +
                 linear(spec.hidden_size, kClasses);
    out.root_params = out.params;
    out.tensors = {{32, 1 * 9}, {32, 1}, {64, 32 * 9}, {64, 1}};
    add_linear(out.tensors, 64 * 7 * 7, spec.hidden_size);
    add_linear(out.tensors, spec.hidden_size, kClasses);
  } else {
    MPIACCEL_THROW("model '" + kind + "' is unknown; accepted: gpt, llama, mlp, cnn");
  }
  return out;
}

ModelFootprint count_footprint(Model& model, const std::vector<std::string>& unit_classes) {
  ModelFootprint out;
  out.kind = model.kind();
  std::unordered_set<const void*> in_units, all;
  // Outermost matching modules only: a unit inside a unit belongs to the outer.
  std::vector<std::shared_ptr<torch::nn::Module>> pending = model.module().children();
  while (!pending.empty()) {
    std::shared_ptr<torch::nn::Module> m = pending.back();
    pending.pop_back();
    if (std::find(unit_classes.begin(), unit_classes.end(), m->name()) == unit_classes.end()) {
      for (const auto& child : m->children()) pending.push_back(child);
      continue;
    }
    int64_t count = 0;
    for (const at::Tensor& p : m->parameters(/*recurse=*/true))
      if (in_units.insert(p.unsafeGetTensorImpl()).second) count += p.numel();
    out.largest_unit_params = std::max(out.largest_unit_params, count);
    ++out.units;
  }
  for (const at::Tensor& p : model.module().parameters(/*recurse=*/true)) {
    if (!all.insert(p.unsafeGetTensorImpl()).second) continue;
    out.params += p.numel();
    const int64_t rows = p.dim() == 0 ? 1 : p.size(0);
    out.tensors.push_back({rows, rows == 0 ? 0 : p.numel() / rows});
    if (!in_units.count(p.unsafeGetTensorImpl())) out.root_params += p.numel();
  }
  return out;
}

int64_t activation_bytes(const std::string& kind, const ModelSpec& spec, int64_t batch, int64_t element_bytes,
                         bool checkpointing, int64_t tp, bool sequence_parallel) {
  MPIACCEL_CHECK(batch >= 1 && (element_bytes == 2 || element_bytes == 4),
                 "activation_bytes: batch must be positive and element_bytes 2 or 4");
  const int64_t a = element_bytes;
  const int64_t b = batch;
  if (kind == "gpt") {
    const int64_t t = spec.block_size, c = spec.n_embd;
    const int64_t layer = gpt_layer_activations(spec, b, a, tp, sequence_parallel);
    // Final norm and head input (4·s·b·h at 2 bytes) and the fp32 log-softmax
    // of the loss (4·s·b·v; this rank's vocabulary slice under tp).
    const int64_t head = 4 * b * t * c * a / 2 + kFp32 * b * t * spec.vocab_size / tp;
    const int64_t layer_input = b * t * c * a / (sequence_parallel ? tp : 1);
    if (!checkpointing) return spec.n_layer * layer + head;
    return spec.n_layer * layer_input + layer + head;
  }
  if (kind == "llama")
    return detail::llama_activation_bytes(spec, batch, element_bytes, checkpointing, tp, sequence_parallel);
  if (kind == "mlp") {
    const int64_t h = spec.hidden_size;
    int64_t kept = 0, inputs = 0, largest = 0, in = kPixels;
    for (int64_t i = 0; i < spec.mlp_layers; ++i) {
      // Linear input, GELU input, dropout output (+ its mask: LibTorch's CPU
      // dropout keeps a mask of the activation's dtype).
      const int64_t block = b * (in + 2 * h) * a + (spec.dropout > 0 ? b * h * a : 0);
      kept += block;
      inputs += b * in * a;
      largest = std::max(largest, block);
      in = h;
    }
    const int64_t head = b * h * a + kFp32 * b * kClasses;
    return (checkpointing ? inputs + largest : kept) + head;
  }
  if (kind == "cnn") {
    const int64_t h = spec.hidden_size;
    constexpr int64_t kIndex = 8;  // max_pool2d's int64 indices
    return b * kPixels * a + b * 32 * kPixels * a + b * 32 * 196 * kIndex + b * 32 * 196 * a +
           b * 64 * 196 * a + b * 64 * 49 * kIndex + b * 64 * 49 * a + b * h * a +
           (spec.dropout > 0 ? b * h * a : 0) + b * h * a + kFp32 * b * kClasses;
  }
  MPIACCEL_THROW("model '" + kind + "' is unknown; accepted: gpt, llama, mlp, cnn");
}

}  // namespace mpiaccel
