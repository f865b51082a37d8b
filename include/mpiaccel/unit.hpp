#pragma once
// How a model lets mpiaccel run its units (docs/fsdp.md, "How a model lets FSDP run its units").
//
// LibTorch's C++ modules have no forward hooks, so FSDP cannot intercept a
// unit's forward the way PyTorch does. Instead a model opts in by
//   1. deriving from mpiaccel::HasUnits (besides torch::nn::Module), and
//   2. running each unit's forward through its UnitRunner:
//        x = units().run(*block, x, [&](const at::Tensor& in) { return block->forward(in); });
// Without an interceptor installed the runner just calls the lambda. FSDP
// installs one that all-gathers the unit's parameters before and reshards
// after; activation checkpointing installs one that keeps only the input and
// recomputes in backward. Units are the modules passed to run(); which of them
// FSDP wraps is decided by the wrap policy ([fsdp] auto_wrap_policy).

#include <ATen/core/Tensor.h>

#include <functional>

namespace torch::nn {
class Module;
}

namespace mpiaccel {

using UnitForward = std::function<at::Tensor(const at::Tensor&)>;

/// Something that runs around a unit's forward (FSDP, activation checkpointing).
class UnitInterceptor {
 public:
  virtual ~UnitInterceptor() = default;
  /// Runs `forward(input)` for `unit`, with whatever must happen around it.
  virtual at::Tensor run(torch::nn::Module& unit, const at::Tensor& input,
                         const UnitForward& forward) = 0;
};

class UnitRunner {
 public:
  /// Runs `forward(input)` through the installed interceptor, if any.
  at::Tensor run(torch::nn::Module& unit, const at::Tensor& input, const UnitForward& forward) {
    return interceptor_ ? interceptor_->run(unit, input, forward) : forward(input);
  }
  /// Installs `interceptor` (nullptr removes it). The caller keeps it alive.
  void set_interceptor(UnitInterceptor* interceptor) { interceptor_ = interceptor; }
  UnitInterceptor* interceptor() const { return interceptor_; }

 private:
  UnitInterceptor* interceptor_ = nullptr;
};

/// The opt-in: a model deriving from this runs its units through units().
class HasUnits {
 public:
  virtual ~HasUnits() = default;
  UnitRunner& units() { return units_; }

 private:
  UnitRunner units_;
};

}  // namespace mpiaccel
