#pragma once
// Shape-only model builds (make_model_shapes): while a NoComputation is
// alive, the thread's dispatch keys include Meta, so every op on an existing
// tensor (the initialisers) runs its meta kernel, which computes nothing,
// while the factories still allocate on the CPU (untouched pages). The
// thread's keys are restored whole after: LibTorch's IncludeDispatchKeyGuard,
// measured here, leaves later CPU ops dispatched to Meta once it removes a
// backend key.

#include <c10/core/impl/LocalDispatchKeySet.h>

#include <optional>

namespace mpiaccel::detail {

class NoComputation {
 public:
  NoComputation();
  ~NoComputation();
  NoComputation(const NoComputation&) = delete;
  NoComputation& operator=(const NoComputation&) = delete;

  /// The innermost one alive on this thread, or nullptr.
  static const NoComputation* current();
  /// The thread's dispatch keys before it.
  const c10::impl::LocalDispatchKeySet& saved() const { return saved_; }

 private:
  c10::impl::LocalDispatchKeySet saved_;
  const NoComputation* outer_;
};

/// A region whose ops compute after all, inside a NoComputation (a small
/// value a module keeps and its forward needs, and whose ops may have no
/// meta kernel: the Llama's rotary frequencies); elsewhere it does nothing.
class ComputeHere {
 public:
  ComputeHere();
  ~ComputeHere();
  ComputeHere(const ComputeHere&) = delete;
  ComputeHere& operator=(const ComputeHere&) = delete;

 private:
  std::optional<c10::impl::LocalDispatchKeySet> inside_;  ///< set inside a NoComputation
};

}  // namespace mpiaccel::detail
