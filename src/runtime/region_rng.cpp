// RegionRng: each rank's own random stream for the draws inside a parallel
// region (region_rng.hpp).

#include <ATen/Context.h>
#include <ATen/core/Generator.h>

#include <mutex>

#include "mpiaccel/region_rng.hpp"

namespace mpiaccel {
namespace {

// The stream: a state of the default generator of one device type, as
// get_state() gives it (a byte tensor whose size depends on the type).
struct Stream {
  std::mutex mutex;
  at::Tensor state;
  c10::DeviceType type = c10::DeviceType::CPU;
};

// Guards alive on this thread: a nested one leaves the outer's stream alone.
thread_local int depth = 0;

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
  std::lock_guard<std::mutex> stream_lock(stream().mutex);
  stream().type = device.type();
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
  if (depth++ > 0) return;
  std::lock_guard<std::mutex> stream_lock(stream().mutex);
  // Unseeded, or seeded for another device: nothing to swap.
  if (!stream().state.defined() || stream().type != device.type()) return;
  at::Generator generator = default_generator(device_);
  std::lock_guard<std::mutex> lock(generator.mutex());
  saved_default_ = generator.get_state();
  generator.set_state(stream().state);  // set_state copies: no clone of the stream
}

RegionRng::~RegionRng() {
  --depth;
  if (!saved_default_.defined()) return;
  at::Generator generator = default_generator(device_);
  std::lock_guard<std::mutex> lock(generator.mutex());
  set_state(generator.get_state());
  generator.set_state(saved_default_);
}

}  // namespace mpiaccel
