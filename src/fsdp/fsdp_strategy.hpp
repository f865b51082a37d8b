#pragma once
// FsdpStrategy: Strategy over an FsdpEngine (internal header).

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fsdp/fsdp_engine.hpp"
#include "mpiaccel/config.hpp"
#include "mpiaccel/fsdp.hpp"
#include "mpiaccel/precision.hpp"
#include "mpiaccel/strategy.hpp"

namespace mpiaccel::detail {

class FsdpStrategy final : public Strategy {
 public:
  FsdpStrategy(const FsdpConfig& config, std::shared_ptr<Communicator> comm, std::string name,
               const PrecisionPolicy& precision = {});
  ~FsdpStrategy() override;

  std::string name() const override { return name_; }
  void prepare(std::shared_ptr<torch::nn::Module> model,
               std::shared_ptr<torch::optim::Optimizer> optimizer) override;
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

  FsdpInfo info() const;
  std::vector<std::pair<std::string, at::Tensor>> full_state_dict();
  FsdpEngine& engine();

 private:
  void require_prepared(const char* what) const;
  void warn_unrun_units();

  FsdpConfig config_;
  FsdpOptions options_;
  std::shared_ptr<Communicator> comm_;
  std::string name_;
  std::shared_ptr<torch::nn::Module> model_;
  std::unique_ptr<FsdpEngine> engine_;
  bool sync_ = true;
  bool warned_unrun_ = false;
  /// (shard parameter, loaded step) of a load in progress.
  std::vector<std::pair<at::Tensor, at::Tensor>> pending_steps_;
};

}  // namespace mpiaccel::detail
