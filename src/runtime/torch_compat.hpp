#pragma once
// The places where the C++ API of LibTorch 1.13 (Debian's libtorch-dev) and
// 2.x (the torch wheel, 2.11 here) differ, each behind one name, so the rest
// of the code is written once. Checked against 1.13 and 2.11; the version
// cut-offs are the releases that changed each API.

#include <ATen/autocast_mode.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>
#include <torch/version.h>

#include <cstddef>
#include <sstream>
#include <string>
#include <type_traits>

#define MPIACCEL_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||           \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace mpiaccel::detail {

// ---- autocast: one switch and one dtype per device type, thread-local.
// 2.4 made them functions of the device type; 1.13 has a CPU and a CUDA copy.

inline bool autocast_enabled(c10::DeviceType device) {
#if MPIACCEL_TORCH_AT_LEAST(2, 4)
  return at::autocast::is_autocast_enabled(device);
#else
  return device == c10::DeviceType::CUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
#endif
}

inline at::ScalarType autocast_dtype(c10::DeviceType device) {
#if MPIACCEL_TORCH_AT_LEAST(2, 4)
  return at::autocast::get_autocast_dtype(device);
#else
  return device == c10::DeviceType::CUDA ? at::autocast::get_autocast_gpu_dtype()
                                         : at::autocast::get_autocast_cpu_dtype();
#endif
}

inline void set_autocast(c10::DeviceType device, bool enabled, at::ScalarType dtype) {
#if MPIACCEL_TORCH_AT_LEAST(2, 4)
  at::autocast::set_autocast_enabled(device, enabled);
  at::autocast::set_autocast_dtype(device, dtype);
#else
  if (device == c10::DeviceType::CUDA) {
    at::autocast::set_enabled(enabled);
    at::autocast::set_autocast_gpu_dtype(dtype);
  } else {
    at::autocast::set_cpu_enabled(enabled);
    at::autocast::set_autocast_cpu_dtype(dtype);
  }
#endif
}

// ---- CPU allocators. 2.3 dropped the const of Allocator::allocate and made
// copy_data pure virtual. An allocator of ours derives from this class and
// implements allocate_bytes.
class CpuAllocatorBase : public c10::Allocator {
 public:
#if MPIACCEL_TORCH_AT_LEAST(2, 3)
  c10::DataPtr allocate(size_t bytes) override { return allocate_bytes(bytes); }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
#else
  c10::DataPtr allocate(size_t bytes) const override { return allocate_bytes(bytes); }
#endif

 protected:
  virtual c10::DataPtr allocate_bytes(size_t bytes) const = 0;
};

// ---- Optimizer::zero_grad() sets gradients to undefined in 2.x (set_to_none,
// the default since 2.0) and zeroes them in place in 1.13. A parameter that
// then gets no gradient is skipped by the optimizer in 2.x (no weight decay,
// no momentum) and stepped with zeros in 1.13; strategies reproduce that.
constexpr bool kZeroGradSetsToNone = MPIACCEL_TORCH_AT_LEAST(2, 0);

// ---- Optimizer::state() is keyed by the parameter's TensorImpl: its address
// as text in 1.13, the address itself in 2.x. Templated on the optimizer so
// this header need not include torch/optim.
template <typename Optimizer>
auto optimizer_state_key(const Optimizer& optimizer, const at::Tensor& param) {
  using Key = typename std::decay_t<decltype(optimizer.state())>::key_type;
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream text;  // as c10::guts::to_string writes it
    text << static_cast<const void*>(param.unsafeGetTensorImpl());
    return text.str();
  } else {
    return static_cast<Key>(param.unsafeGetTensorImpl());
  }
}

}  // namespace mpiaccel::detail
