// The CNN family's registration (include/mpiaccel/model_family.hpp) and its
// shapes in closed form, mirroring cnn.cpp.

#include "models/families/cnn/cnn.hpp"
#include "models/images.hpp"
#include "models/split_rows.hpp"

namespace mpiaccel::detail {
namespace {

constexpr int64_t kFlat = 64 * 7 * 7;  // the second pool's output, flattened

ModelFootprint cnn_footprint(const ModelSpec& spec, int64_t) {
  // No units: FSDP treats the whole model as its root.
  ModelFootprint out;
  out.params = (1 * 32 * 9 + 32) + (32 * 64 * 9 + 64) + (kFlat * spec.hidden_size + spec.hidden_size) +
               (spec.hidden_size * kClasses + kClasses);
  out.root_params = out.params;
  out.tensors = {{32, 1 * 9}, {32, 1}, {64, 32 * 9}, {64, 1}};
  add_linear_rows(out.tensors, kFlat, spec.hidden_size);
  add_linear_rows(out.tensors, spec.hidden_size, kClasses);
  return out;
}

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
      &cnn_footprint,
      &cnn_activation_bytes,
      /*pipeline_piece_tensors=*/nullptr,
      /*tensor_parallel=*/false,
      /*hf=*/nullptr,
  };
  return family;
}

}  // namespace mpiaccel::detail
