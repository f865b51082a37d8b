#pragma once
// Activation checkpointing (docs/memory.md): a unit keeps only its input in
// forward and recomputes its forward during backward, trading one extra
// forward per unit for the unit's activations.
//
// LibTorch's C++ API has no torch.utils.checkpoint, so this is a custom
// autograd Function whose inputs are the unit's input AND the unit's
// parameters. Its backward recomputes the unit (under the random-number and
// autocast state of the original forward, so dropout masks match) and hands
// the parameter gradients back to the main backward as ordinary gradients:
// they arrive through the parameters' AccumulateGrad nodes of the outer graph,
// where DDP's and FSDP's gradient hooks run as without checkpointing. The
// recomputation's own graph is differentiated with torch::autograd::grad,
// which accumulates into no .grad and fires no AccumulateGrad hook.
//
// Composition with FSDP: FSDP's interceptor must run AROUND the checkpoint
// (it gathers the parameters, then the checkpointed forward runs; the
// gradient hook FSDP puts on the unit's output gathers them again just before
// the recomputation). Pass FSDP's interceptor as `around`:
//   auto* fsdp = model.units().interceptor();           // after strategy.prepare()
//   ActivationCheckpointing ac({"DecoderLayer"}, fsdp);
//   model.units().set_interceptor(&ac);
// enable_activation_checkpointing() does exactly this from the config.
//
// The UnitForward a model passes to UnitRunner::run is copied and called
// again during backward: what it captures must outlive the backward (the
// bundled models capture their layer by reference into a member vector).

#include <ATen/core/Tensor.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mpiaccel/config.hpp"
#include "mpiaccel/unit.hpp"

namespace torch::nn {
class Module;
}

namespace mpiaccel {

/// Runs `forward(input)` checkpointed: saves `input` only, recomputes in
/// backward. The parameters of `unit` (those requiring grad) are the
/// function's other inputs and receive their gradients through the main
/// backward; a parameter the unit does not use gets a zero gradient. Without
/// grad mode, or when nothing requires grad, it just calls forward(input).
/// `recomputations` (optional) counts backward recomputations.
at::Tensor checkpoint_unit(torch::nn::Module& unit, const at::Tensor& input,
                           const UnitForward& forward,
                           std::shared_ptr<std::atomic<int64_t>> recomputations = nullptr);

/// The UnitInterceptor that checkpoints selected units.
class ActivationCheckpointing final : public UnitInterceptor {
 public:
  /// Checkpoints the units whose Module::name() is one of `unit_classes`
  /// (empty: every unit). `around` (optional, not owned) is the interceptor
  /// that runs around each unit outside the checkpoint, e.g. FSDP's.
  explicit ActivationCheckpointing(std::vector<std::string> unit_classes,
                                   UnitInterceptor* around = nullptr);

  at::Tensor run(torch::nn::Module& unit, const at::Tensor& input,
                 const UnitForward& forward) override;

  bool selects(const torch::nn::Module& unit) const;
  UnitInterceptor* around() const { return around_; }
  /// Units run checkpointed so far (forwards that recorded a graph).
  int64_t checkpointed_runs() const { return checkpointed_runs_; }
  /// Recomputations done by backward so far.
  int64_t recomputations() const { return *recomputations_; }

 private:
  std::vector<std::string> unit_classes_;
  UnitInterceptor* around_;
  int64_t checkpointed_runs_ = 0;
  std::shared_ptr<std::atomic<int64_t>> recomputations_;
};

/// With [fsdp] activation_checkpointing = true: installs an
/// ActivationCheckpointing on `model` (which must derive from HasUnits and
/// contain a module of a class named by transformer_layer_cls_to_wrap; Error
/// otherwise), around the interceptor already installed (FSDP's, so call it
/// after Strategy::prepare). Returns it (the caller keeps it alive and calls
/// disable_activation_checkpointing before destroying it or the strategy),
/// or nullptr when the key is false.
std::unique_ptr<ActivationCheckpointing> enable_activation_checkpointing(torch::nn::Module& model,
                                                                         const Config& config);
/// Puts back the interceptor `checkpointing` wrapped, if it is still the one
/// installed on `model`. Never throws.
void disable_activation_checkpointing(torch::nn::Module& model,
                                      const ActivationCheckpointing& checkpointing) noexcept;

}  // namespace mpiaccel
