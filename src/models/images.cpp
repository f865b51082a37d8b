// The image families' shared checks (images.hpp).

#include "models/images.hpp"

#include <ATen/ATen.h>

#include "mpiaccel/error.hpp"

namespace mpiaccel::detail {

void check_images(const at::Tensor& input, const char* model) {
  MPIACCEL_CHECK(input.dim() == 4 && input.size(1) == 1 && input.size(2) == 28 &&
                     input.size(3) == 28 && at::isFloatingType(input.scalar_type()),
                 std::string(model) + " input must be float images [batch, 1, 28, 28]");
}

void check_image_model_spec(const ModelSpec& spec) {
  MPIACCEL_CHECK(spec.hidden_size >= 1, "[model] hidden_size must be at least 1");
  MPIACCEL_CHECK(spec.dropout >= 0.0 && spec.dropout < 1.0,
                 "[model] dropout " + std::to_string(spec.dropout) + " is not in [0, 1)");
}

}  // namespace mpiaccel::detail
