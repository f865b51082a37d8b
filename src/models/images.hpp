#pragma once
// What the image families (families/mlp, families/cnn) share: Fashion-MNIST's
// shape and the checks of their input and sizes.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

#include "mpiaccel/models.hpp"

namespace mpiaccel::detail {

inline constexpr int64_t kPixels = 28 * 28;
inline constexpr int64_t kClasses = 10;

/// Throws Error unless `input` is float images [batch, 1, 28, 28]; `model` names the model.
void check_images(const at::Tensor& input, const char* model);

/// Throws Error for a hidden_size below 1 or a dropout outside [0, 1).
void check_image_model_spec(const ModelSpec& spec);

}  // namespace mpiaccel::detail
