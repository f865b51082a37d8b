#pragma once
// DdpStrategy: Strategy over a Reducer (internal header; tests reach the
// reducer through it).

#include <memory>
#include <string>
#include <vector>

#include "ddp/node_shared_params.hpp"
#include "grad_sync/reducer.hpp"
#include "mpiaccel/config.hpp"
#include "mpiaccel/precision.hpp"
#include "mpiaccel/strategy.hpp"
#include "state/replicated_state.hpp"

namespace mpiaccel::detail {

class DdpStrategy final : public Strategy {
 public:
  DdpStrategy(const DdpConfig& config, std::shared_ptr<Communicator> comm,
              const PrecisionPolicy& precision = {});

  std::string name() const override { return "ddp"; }
  void prepare(std::shared_ptr<torch::nn::Module> model,
               std::shared_ptr<torch::optim::Optimizer> optimizer) override;
  void register_comm_hook(std::shared_ptr<CommHook> hook) override;
  void set_gradient_sync(bool enabled) override;
  bool gradient_sync() const override;
  void after_backward() override;
  double grad_norm() override;
  void scale_grads(double factor) override;
  void step(torch::optim::Optimizer& optimizer) override;
  void zero_grad(torch::optim::Optimizer& optimizer) override;
  ShardedStateDict state_dict(torch::optim::Optimizer& optimizer) override;
  ShardedStateDict load_targets(torch::optim::Optimizer& optimizer) override;
  void finish_load(torch::optim::Optimizer& optimizer) override;
  MemoryAccount memory(torch::optim::Optimizer& optimizer) const override;

  /// The reducer (after prepare), for tests and benchmarks.
  Reducer& reducer();
  /// Whether the parameters live in node-shared memory ([ddp]
  /// node_shared_params, where possible; after prepare).
  bool node_shared() const { return node_shared_ != nullptr; }
  /// The bucket options derived from the config, with its comm hook.
  static ReducerOptions reducer_options(const DdpConfig& config, const PrecisionPolicy& precision = {});

 private:
  void require_prepared(const char* what) const;

  DdpConfig config_;
  PrecisionPolicy precision_;
  std::shared_ptr<Communicator> comm_;
  std::shared_ptr<torch::nn::Module> model_;
  std::shared_ptr<CommHook> hook_;  // registered by the user; null: [ddp] comm_hook's
  std::unique_ptr<Reducer> reducer_;
  std::unique_ptr<NodeSharedParams> node_shared_;  // null: every rank its own replica
  bool sync_ = true;
  ReplicatedLoad pending_load_;
};

}  // namespace mpiaccel::detail
