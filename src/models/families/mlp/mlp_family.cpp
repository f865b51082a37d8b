// The MLP family's registration (include/mpiaccel/model_family.hpp) and its
// shapes in closed form, mirroring mlp.cpp.

#include <algorithm>

#include "models/families/mlp/mlp.hpp"
#include "models/images.hpp"
#include "models/split_rows.hpp"

namespace mpiaccel::detail {
namespace {

ModelFootprint mlp_footprint(const ModelSpec& spec, int64_t) {
  ModelFootprint out;
  out.units = spec.mlp_layers;
  int64_t in = kPixels;
  for (int64_t i = 0; i < spec.mlp_layers; ++i) {
    const int64_t block = in * spec.hidden_size + spec.hidden_size;
    add_linear_rows(out.tensors, in, spec.hidden_size);
    out.largest_unit_params = std::max(out.largest_unit_params, block);
    out.params += block;
    in = spec.hidden_size;
  }
  out.root_params = spec.hidden_size * kClasses + kClasses;
  out.params += out.root_params;
  add_linear_rows(out.tensors, spec.hidden_size, kClasses);
  return out;
}

int64_t mlp_activation_bytes(const ModelSpec& spec, int64_t b, int64_t a, bool checkpointing, int64_t, bool) {
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

}  // namespace

const ModelFamily& mlp_family() {
  static const ModelFamily family{
      "mlp",
      "a Fashion-MNIST classifier: hidden Linear + GELU blocks (units) and a head",
      ModelFamily::Input::Images,
      {"MlpBlock"},
      &make_mlp,
      &mlp_footprint,
      &mlp_activation_bytes,
      /*pipeline_piece_tensors=*/nullptr,
      /*tensor_parallel=*/false,
      /*hf=*/nullptr,
  };
  return family;
}

}  // namespace mpiaccel::detail
