#pragma once
// Deferred construction (ModelInit::deferred): each module's parameters give
// their memory back right after the module is built, so a deferred model
// never holds more than its largest module (docs/memory.md).

#include "mpiaccel/models.hpp"

namespace torch::nn {
class Module;
}

namespace mpiaccel::detail {

/// While alive, LibTorch's CPU allocations come straight from mmap and go
/// back with munmap. A deferred build frees each module's parameters right
/// after building it; through malloc, glibc would keep much of that memory
/// resident (its heap, fragmented by the small allocations between modules:
/// measured, half of the model). Nesting with other replacements of c10's CPU
/// allocator (recompute/cpu_memory_meter.hpp) is fine when scoped (LIFO).
class DeferredBuildScope {
 public:
  DeferredBuildScope();
  ~DeferredBuildScope();
  DeferredBuildScope(const DeferredBuildScope&) = delete;
  DeferredBuildScope& operator=(const DeferredBuildScope&) = delete;

 private:
  void* previous_;  // c10::Allocator*
};

/// With `init.deferred`, replaces the data of every parameter of `module`
/// by a tensor of the same shape and dtype on init.device whose storage
/// holds no memory (0 bytes, a null data pointer, the device's allocator:
/// FSDP refills such storages in place). Otherwise does nothing.
void release_if_deferred(torch::nn::Module& module, const ModelInit& init);

/// `holder` (a ModuleHolder or shared_ptr) after release_if_deferred(*holder):
/// register_module("fc", built(torch::nn::Linear(...), init)).
template <class Holder>
Holder built(Holder holder, const ModelInit& init) {
  release_if_deferred(*holder, init);
  return holder;
}

}  // namespace mpiaccel::detail
