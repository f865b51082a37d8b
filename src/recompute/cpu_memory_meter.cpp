#include "recompute/cpu_memory_meter.hpp"

#include <c10/core/CPUAllocator.h>

#include <mutex>
#include <unordered_map>
#include <utility>

#include "mpiaccel/error.hpp"

namespace mpiaccel::detail {
namespace {

// One block handed out through a meter: the inner allocator's DataPtr (which
// frees it), its size and the counters it was counted in.
struct Counted {
  c10::DataPtr inner;
  int64_t bytes = 0;
  std::shared_ptr<CpuMemoryMeter::Counters> counters;
};

// Blocks by address. The deleter gets only the address (raw_allocate's
// contract: context == data), and blocks may outlive the meter.
struct Registry {
  std::mutex mutex;
  std::unordered_map<void*, Counted> blocks;
};

Registry& registry() {
  static auto* r = new Registry();  // never destroyed: blocks may be freed at exit
  return *r;
}

// c10 keeps one CPU allocator per priority level; above the default's 0.
constexpr uint8_t kPriority = 100;
std::atomic<bool> g_installed{false};

}  // namespace

CpuMemoryMeter::CpuMemoryMeter() : inner_(c10::GetCPUAllocator()) {
  MPIACCEL_CHECK(!g_installed.exchange(true), "a CpuMemoryMeter is already installed");
  c10::SetCPUAllocator(this, kPriority);
}

CpuMemoryMeter::~CpuMemoryMeter() {
  c10::SetCPUAllocator(inner_, kPriority);
  g_installed = false;
}

c10::DataPtr CpuMemoryMeter::allocate_bytes(size_t bytes) const {
  c10::DataPtr inner = inner_->allocate(bytes);
  void* data = inner.get();
  const c10::Device device = inner.device();
  if (data == nullptr) return inner;  // zero bytes: nothing to count or free
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.blocks[data] = Counted{std::move(inner), static_cast<int64_t>(bytes), counters_};
  }
  const int64_t now = counters_->current += static_cast<int64_t>(bytes);
  int64_t seen = counters_->peak.load();
  while (now > seen && !counters_->peak.compare_exchange_weak(seen, now)) {
  }
  return c10::DataPtr(data, data, &CpuMemoryMeter::release, device);
}

void CpuMemoryMeter::release(void* data) {
  Counted block;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.blocks.find(data);
    if (it == r.blocks.end()) return;
    block = std::move(it->second);
    r.blocks.erase(it);
  }
  block.counters->current -= block.bytes;
  // `block.inner` frees the memory through the inner allocator on scope exit.
}

}  // namespace mpiaccel::detail
