// RegionRng: each tensor-parallel rank's own random stream for dropout
// inside a parallel region (tensor_parallel.hpp).

#include <ATen/Context.h>
#include <ATen/core/Generator.h>

#include <mutex>

#include "mpiaccel/tensor_parallel.hpp"

namespace mpiaccel::tp {
namespace {

// The stream's state: a generator state as get_state() gives it (a byte
// tensor), the same for any device's default generator.
struct Stream {
  std::mutex mutex;
  at::Tensor state;
};

Stream& stream() {
  static Stream s;
  return s;
}

at::Generator default_generator(at::Device device) {
  return at::globalContext().defaultGenerator(device);
}

}  // namespace

void RegionRng::seed(uint64_t seed, int64_t dp_rank, int64_t tp_rank, at::Device device) {
  at::Generator generator = default_generator(device);
  std::lock_guard<std::mutex> lock(generator.mutex());
  const at::Tensor saved = generator.get_state();
  // Megatron's offset keeps the streams apart from the default ones (seed + rank).
  generator.set_current_seed(seed + 2718 + 1000003 * static_cast<uint64_t>(dp_rank) +
                             static_cast<uint64_t>(tp_rank));
  set_state(generator.get_state());
  generator.set_state(saved);
}

at::Tensor RegionRng::state() {
  std::lock_guard<std::mutex> lock(stream().mutex);
  return stream().state;
}

void RegionRng::set_state(const at::Tensor& state) {
  std::lock_guard<std::mutex> lock(stream().mutex);
  stream().state = state.defined() ? state.clone() : state;
}

RegionRng::RegionRng(at::Device device) : device_(device) {
  const at::Tensor region = state();
  if (!region.defined()) return;
  at::Generator generator = default_generator(device_);
  std::lock_guard<std::mutex> lock(generator.mutex());
  saved_default_ = generator.get_state();
  generator.set_state(region);
}

RegionRng::~RegionRng() {
  if (!saved_default_.defined()) return;
  at::Generator generator = default_generator(device_);
  std::lock_guard<std::mutex> lock(generator.mutex());
  set_state(generator.get_state());
  generator.set_state(saved_default_);
}

}  // namespace mpiaccel::tp
