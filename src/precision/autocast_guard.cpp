// AutocastGuard over LibTorch's thread-local autocast switches, one per
// device type (runtime/torch_compat.hpp).

#include <ATen/autocast_mode.h>

#include <optional>
#include <string>

#include "mpiaccel/error.hpp"
#include "mpiaccel/precision.hpp"
#include "runtime/torch_compat.hpp"

namespace mpiaccel {
namespace {

std::optional<at::Device> device_named(const std::string& name) {
  try {
    return at::Device(name);
  } catch (const c10::Error&) {
    return std::nullopt;
  }
}

}  // namespace

AutocastGuard::AutocastGuard(const std::string& device, at::ScalarType dtype) {
  if (dtype == at::kFloat) return;
  MPIACCEL_CHECK(dtype == at::kBFloat16 || dtype == at::kHalf,
                 "autocast computes in bf16 or fp16, not " + precision_dtype_name(dtype));
  const std::optional<at::Device> where = device_named(device);
  cuda_ = where && where->is_cuda();
  MPIACCEL_CHECK(cuda_ || (where && where->is_cpu()), "autocast: device '" + device + "' is neither cpu nor cuda[:N]");
  if (!cuda_) {
    // CPU autocast in 1.13 lowers to bf16 only, and fp16 matmuls have no CPU
    // kernels at all (LibTorch 1.13 has no CPU Half addmm).
    MPIACCEL_CHECK(dtype == at::kBFloat16,
                   "fp16 compute needs a CUDA device: LibTorch has no CPU fp16 kernels "
                   "(addmm); use [distributed] mixed_precision = bf16 on CPU");
  }
  const c10::DeviceType type = cuda_ ? c10::DeviceType::CUDA : c10::DeviceType::CPU;
  previous_enabled_ = detail::autocast_enabled(type);
  previous_dtype_ = detail::autocast_dtype(type);
  detail::set_autocast(type, true, dtype);
  at::autocast::increment_nesting();
  active_ = true;
}

AutocastGuard::~AutocastGuard() {
  if (!active_) return;
  // The cache holds the low-precision copies of the parameters made in this
  // region; torch.autocast drops it when the outermost region ends, so the
  // next step casts the updated weights afresh.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  detail::set_autocast(cuda_ ? c10::DeviceType::CUDA : c10::DeviceType::CPU, previous_enabled_,
                       previous_dtype_);
}

}  // namespace mpiaccel
