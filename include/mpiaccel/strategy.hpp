#pragma once
// How parameters, gradients and optimizer state are laid out across ranks, and
// the communication that keeps them consistent. One Strategy per run, chosen by
// [distributed] strategy: NoDist, DDP (src/ddp), and later FSDP / ZeRO.
//
// The Accelerator drives a strategy through one training step:
//   prepare(model, optimizer)                      once
//   set_gradient_sync(last_micro_step)             each micro-step
//   ... forward ... loss.backward() ...            hooks launch communication
//   after_backward()                               each micro-step
//   grad_norm() / scale_grads()                    clipping (optional)
//   step(optimizer); zero_grad(optimizer)          each optimizer step
// Every call is collective over the strategy's communicator: every rank calls
// it, in the same order.

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mpiaccel/state.hpp"

namespace torch::nn {
class Module;
}
namespace torch::optim {
class Optimizer;
}

namespace mpiaccel {

class Communicator;
class CommHook;

class Strategy {
 public:
  virtual ~Strategy() = default;

  /// "no", "ddp", "fsdp", "zero1", ...
  virtual std::string name() const = 0;

  /// Takes the model (and the optimizer built over its parameters) under the
  /// strategy: checks the model is the same on every rank, makes parameters
  /// and buffers identical (rank 0's) or shards them, installs hooks, and
  /// re-points the optimizer at the tensors this rank updates. Collective.
  virtual void prepare(std::shared_ptr<torch::nn::Module> model,
                       std::shared_ptr<torch::optim::Optimizer> optimizer) = 0;

  /// Replaces how gradient buckets are reduced (DDP only; before prepare).
  /// The default refuses: other strategies reduce-scatter shards, which a
  /// bucket hook does not describe.
  virtual void register_comm_hook(std::shared_ptr<CommHook> hook);

  /// false inside a no_sync / gradient-accumulation window: the backward that
  /// follows accumulates locally and communicates nothing.
  virtual void set_gradient_sync(bool enabled) = 0;
  virtual bool gradient_sync() const = 0;

  /// After loss.backward() returned on a micro-step. Collective.
  virtual void after_backward() {}

  /// The L2 norm of the gradients the optimizer will apply, over all ranks
  /// (sharded gradients are reduced), of the parameters count_in_grad_norm
  /// accepts. Collective.
  virtual double grad_norm() = 0;
  /// Which of the model's parameters (its own tensors, as prepare() got
  /// them) grad_norm() counts; all when unset. Under tensor parallelism the
  /// Accelerator counts a parameter every rank of a tp group holds whole on
  /// the group's first rank only, and sums the group's norms.
  void count_in_grad_norm(std::function<bool(const at::Tensor& param)> counted) { counted_ = std::move(counted); }
  /// Multiplies those gradients by `factor` (gradient clipping).
  virtual void scale_grads(double factor) = 0;

  /// The optimizer step on this rank's layout plus the communication that
  /// follows it (e.g. all-gathering updated shards). Collective.
  virtual void step(torch::optim::Optimizer& optimizer) = 0;
  virtual void zero_grad(torch::optim::Optimizer& optimizer) = 0;

  /// Model parameters and buffers ("model/<fqn>") and optimizer slots
  /// ("optim/<fqn>/<slot>") with this rank's rows, for saving. Replicated
  /// tensors are spread over the ranks so every rank writes a part.
  virtual ShardedStateDict state_dict(torch::optim::Optimizer& optimizer) = 0;
  /// The same names with this rank's destination rows, for loading; after the
  /// checkpoint has filled them, finish_load() makes the layout consistent.
  virtual ShardedStateDict load_targets(torch::optim::Optimizer& optimizer) = 0;
  virtual void finish_load(torch::optim::Optimizer& optimizer) {}

  /// Bytes this rank holds for parameters, gradients and optimizer state
  /// (our own accounting, for tests and estimate-memory).
  struct MemoryAccount {
    int64_t param_bytes = 0;
    int64_t grad_bytes = 0;
    int64_t optimizer_bytes = 0;
  };
  virtual MemoryAccount memory(torch::optim::Optimizer& optimizer) const = 0;

 protected:
  bool counted_in_grad_norm(const at::Tensor& param) const { return !counted_ || counted_(param); }
  /// `values[i]` for each `params[i]` grad_norm() counts (all when unset).
  std::vector<at::Tensor> counted_only(const std::vector<at::Tensor>& params,
                                       const std::vector<at::Tensor>& values) const {
    if (!counted_) return values;
    std::vector<at::Tensor> kept;
    for (size_t i = 0; i < params.size(); ++i)
      if (counted_(params[i])) kept.push_back(values[i]);
    return kept;
  }

 private:
  std::function<bool(const at::Tensor& param)> counted_;
};

}  // namespace mpiaccel
