// The MLP family's registration (include/mpiaccel/model_family.hpp) and its
// activations in closed form, mirroring mlp.cpp.

#include <algorithm>

#include "models/families/mlp/mlp.hpp"
#include "models/family_shapes.hpp"
#include "models/images.hpp"

namespace mpiaccel::detail {
namespace {

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
      /*tensor_split=*/nullptr,
      /*check_tensor_parallel=*/nullptr,
      &mlp_activation_bytes,
      /*pipeline_piece_tensors=*/nullptr,
      /*hf=*/nullptr,
  };
  return family;
}

}  // namespace mpiaccel::detail
