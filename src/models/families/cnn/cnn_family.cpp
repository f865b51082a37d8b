// The CNN family's registration (include/mpiaccel/model_family.hpp) and its
// activations in closed form, mirroring cnn.cpp.

#include "models/families/cnn/cnn.hpp"
#include "models/family_shapes.hpp"
#include "models/images.hpp"

namespace mpiaccel::detail {
namespace {

int64_t cnn_activation_bytes(const ModelSpec& spec, int64_t b, int64_t a, bool, int64_t, bool) {
  const int64_t h = spec.hidden_size;
  constexpr int64_t kIndex = 8;  // max_pool2d's int64 indices
  return b * kPixels * a + b * 32 * kPixels * a + b * 32 * 196 * kIndex + b * 32 * 196 * a +
         b * 64 * 196 * a + b * 64 * 49 * kIndex + b * 64 * 49 * a + b * h * a +
         (spec.dropout > 0 ? b * h * a : 0) + b * h * a + kFp32 * b * kClasses;
}

}  // namespace

const ModelFamily& cnn_family() {
  static const ModelFamily family{
      "cnn",
      "a Fashion-MNIST classifier: two conv + pool blocks, a hidden layer and a head",
      ModelFamily::Input::Images,
      /*unit_classes=*/{},
      &make_cnn,
      /*tensor_split=*/nullptr,
      /*check_tensor_parallel=*/nullptr,
      &cnn_activation_bytes,
      /*pipeline_piece_tensors=*/nullptr,
      /*hf=*/nullptr,
  };
  return family;
}

}  // namespace mpiaccel::detail
