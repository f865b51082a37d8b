// AutocastGuard over LibTorch 1.13's thread-local autocast switches
// (ATen/autocast_mode.h): set_enabled / set_autocast_gpu_dtype are CUDA's,
// set_cpu_enabled / set_autocast_cpu_dtype the CPU's.

#include <ATen/autocast_mode.h>

#include <string>

#include "mpiaccel/error.hpp"
#include "mpiaccel/precision.hpp"

namespace mpiaccel {

AutocastGuard::AutocastGuard(const std::string& device, at::ScalarType dtype) {
  if (dtype == at::kFloat) return;
  MPIACCEL_CHECK(dtype == at::kBFloat16 || dtype == at::kHalf,
                 "autocast computes in bf16 or fp16, not " + precision_dtype_name(dtype));
  cuda_ = device.rfind("cuda", 0) == 0;
  MPIACCEL_CHECK(cuda_ || device == "cpu", "autocast: device '" + device + "' is neither cpu nor cuda[:N]");
  if (!cuda_) {
    // CPU autocast in 1.13 lowers to bf16 only, and fp16 matmuls have no CPU
    // kernels at all (LibTorch 1.13 has no CPU Half addmm).
    MPIACCEL_CHECK(dtype == at::kBFloat16,
                   "fp16 compute needs a CUDA device: LibTorch has no CPU fp16 kernels "
                   "(addmm); use [distributed] mixed_precision = bf16 on CPU");
    previous_enabled_ = at::autocast::is_cpu_enabled();
    previous_dtype_ = at::autocast::get_autocast_cpu_dtype();
    at::autocast::set_cpu_enabled(true);
    at::autocast::set_autocast_cpu_dtype(dtype);
  } else {
    previous_enabled_ = at::autocast::is_enabled();
    previous_dtype_ = at::autocast::get_autocast_gpu_dtype();
    at::autocast::set_enabled(true);
    at::autocast::set_autocast_gpu_dtype(dtype);
  }
  at::autocast::increment_nesting();
  active_ = true;
}

AutocastGuard::~AutocastGuard() {
  if (!active_) return;
  // The cache holds the low-precision copies of the parameters made in this
  // region; torch.autocast drops it when the outermost region ends, so the
  // next step casts the updated weights afresh.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  if (cuda_) {
    at::autocast::set_enabled(previous_enabled_);
    at::autocast::set_autocast_gpu_dtype(previous_dtype_);
  } else {
    at::autocast::set_cpu_enabled(previous_enabled_);
    at::autocast::set_autocast_cpu_dtype(previous_dtype_);
  }
}

}  // namespace mpiaccel
