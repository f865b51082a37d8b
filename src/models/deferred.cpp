// Releasing a freshly built module's parameter memory (see deferred.hpp).

#include "models/deferred.hpp"

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <sys/mman.h>
#include <torch/nn/module.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "mpiaccel/error.hpp"
#include "runtime/torch_compat.hpp"

namespace mpiaccel::detail {
namespace {

// The mapping's length sits in front of the data; 64 bytes keep c10's alignment.
constexpr size_t kHeader = 64;

class UnmappingAllocator final : public CpuAllocatorBase {
 public:
  c10::DataPtr allocate_bytes(size_t bytes) const override {
    const c10::Device cpu(c10::DeviceType::CPU);
    if (bytes == 0) return c10::DataPtr(nullptr, cpu);
    const size_t length = bytes + kHeader;
    void* base = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    MPIACCEL_CHECK(base != MAP_FAILED, "deferred model build: mmap of " + std::to_string(length) +
                                           " bytes failed: " + std::strerror(errno));
    std::memcpy(base, &length, sizeof length);
    void* data = static_cast<char*>(base) + kHeader;
    return c10::DataPtr(data, data, &UnmappingAllocator::release, cpu);
  }
  // Some kernels allocate raw memory: the address alone must free it.
  c10::DeleterFnPtr raw_deleter() const override { return &UnmappingAllocator::release; }

  static void release(void* data) {
    if (data == nullptr) return;
    void* base = static_cast<char*>(data) - kHeader;
    size_t length = 0;
    std::memcpy(&length, base, sizeof length);
    munmap(base, length);
  }
};

UnmappingAllocator& unmapping_allocator() {
  static auto* allocator = new UnmappingAllocator();  // never destroyed: blocks may outlive scopes
  return *allocator;
}

// The priority CpuMemoryMeter uses too, so either can be installed after the other.
constexpr uint8_t kPriority = 100;

}  // namespace

DeferredBuildScope::DeferredBuildScope() : previous_(c10::GetCPUAllocator()) {
  c10::SetCPUAllocator(&unmapping_allocator(), kPriority);
}

DeferredBuildScope::~DeferredBuildScope() {
  c10::SetCPUAllocator(static_cast<c10::Allocator*>(previous_), kPriority);
}

void release_if_deferred(torch::nn::Module& module, const ModelInit& init) {
  if (!init.deferred) return;
  const at::Device device(init.device);
  for (at::Tensor& p : module.parameters(/*recurse=*/true)) {
    // A 0-byte storage with the parameter's full sizes: the state FSDP leaves
    // a resharded parameter in. Swapping the data (as Module::to does) drops
    // the initialised memory and keeps the parameter's identity, so the
    // optimizer and the module still hold the same tensor.
    at::Tensor empty = at::empty({0}, p.options().device(device));
    empty.unsafeGetTensorImpl()->set_sizes_contiguous(p.sizes());
    p.set_data(empty);
  }
}

}  // namespace mpiaccel::detail
