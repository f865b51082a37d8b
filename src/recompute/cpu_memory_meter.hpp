#pragma once
// Counts the bytes LibTorch allocates on the CPU, current and peak, by
// wrapping c10's CPU allocator: the measure behind the activation-memory test
// and benchmark (docs/memory.md). Only memory allocated while a meter is
// installed is counted; tensors allocated earlier free through their own
// deleters and are not subtracted. One meter at a time, installed for the
// whole process (c10's CPU allocator is global).

#include <c10/core/Allocator.h>

#include <atomic>
#include <cstdint>
#include <memory>

#include "runtime/torch_compat.hpp"

namespace mpiaccel::detail {

class CpuMemoryMeter final : public CpuAllocatorBase {
 public:
  /// Installs itself as the CPU allocator (over the one in place).
  CpuMemoryMeter();
  /// Puts the previous allocator back. Memory it handed out stays valid and
  /// is still freed through it.
  ~CpuMemoryMeter() override;
  CpuMemoryMeter(const CpuMemoryMeter&) = delete;
  CpuMemoryMeter& operator=(const CpuMemoryMeter&) = delete;

  c10::DataPtr allocate_bytes(size_t bytes) const override;
  /// Some kernels allocate raw memory (Allocator::raw_allocate), which
  /// needs a deleter that knows the block from its address alone.
  c10::DeleterFnPtr raw_deleter() const override { return &CpuMemoryMeter::release; }

  /// Bytes allocated through the meter and not yet freed.
  int64_t current() const { return counters_->current; }
  /// The highest current() since construction or reset_peak().
  int64_t peak() const { return counters_->peak; }
  /// Starts a new peak from current().
  void reset_peak() { counters_->peak = counters_->current.load(); }

  struct Counters {
    std::atomic<int64_t> current{0};
    std::atomic<int64_t> peak{0};
  };

 private:
  static void release(void* data);

  c10::Allocator* inner_;
  // Shared with every allocation, which may be freed after the meter is gone.
  std::shared_ptr<Counters> counters_ = std::make_shared<Counters>();
};

}  // namespace mpiaccel::detail
