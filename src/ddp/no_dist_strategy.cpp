// NoDist: the single-process layout; nothing is communicated.

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <string>
#include <utility>

#include "grad_sync/grad_math.hpp"
#include "mpiaccel/comm.hpp"
#include "mpiaccel/ddp.hpp"
#include "mpiaccel/error.hpp"
#include "state/optimizer_state.hpp"
#include "state/param_list.hpp"
#include "state/replicated_state.hpp"

namespace mpiaccel {
namespace detail {
namespace {

class NoDistStrategy final : public Strategy {
 public:
  NoDistStrategy(int rank, std::string name) : rank_(rank), name_(std::move(name)) {}

  std::string name() const override { return name_; }

  void prepare(std::shared_ptr<torch::nn::Module> model,
               std::shared_ptr<torch::optim::Optimizer> /*optimizer*/) override {
    MPIACCEL_CHECK(model, "prepare: no model");
    model_ = std::move(model);
    params_ = trainable_params(*model_).params;
  }
  void set_gradient_sync(bool enabled) override { sync_ = enabled; }
  bool gradient_sync() const override { return sync_; }
  double grad_norm() override { return local_grad_norm(counted_only(params_, params_)); }
  void scale_grads(double factor) override { scale_local_grads(params_, factor); }
  void step(torch::optim::Optimizer& optimizer) override { optimizer.step(); }
  void zero_grad(torch::optim::Optimizer& optimizer) override {
    // As the LibTorch's own Optimizer::zero_grad(): one process is the reference.
    reset_local_grads(params_);
    for (const auto& group : optimizer.param_groups()) reset_local_grads(group.params());
  }
  ShardedStateDict state_dict(torch::optim::Optimizer& optimizer) override {
    require_prepared();
    // Ranks are independent here: rank 0's copy is the one saved.
    return replicated_state_dict(*model_, optimizer, rank_, 1, RowOwnership::RankZero);
  }
  ShardedStateDict load_targets(torch::optim::Optimizer& optimizer) override {
    require_prepared();
    pending_ = replicated_load_targets(*model_, optimizer);
    return pending_.targets;
  }
  void finish_load(torch::optim::Optimizer& optimizer) override {
    pending_.finish(optimizer);
    pending_ = ReplicatedLoad{};
  }
  MemoryAccount memory(torch::optim::Optimizer& optimizer) const override {
    require_prepared();
    MemoryAccount account;
    std::vector<at::Tensor> all;
    for (const auto& item : model_->named_parameters(true)) all.push_back(item.value());
    account.param_bytes = tensor_bytes(all);
    account.grad_bytes = grad_bytes(params_);
    account.optimizer_bytes = optimizer_state_bytes(optimizer);
    return account;
  }

 private:
  void require_prepared() const { MPIACCEL_CHECK(model_, "strategy '" + name_ + "': used before prepare()"); }

  int rank_;
  std::string name_;
  bool sync_ = true;
  std::shared_ptr<torch::nn::Module> model_;
  std::vector<at::Tensor> params_;
  ReplicatedLoad pending_;
};

}  // namespace
}  // namespace detail

std::unique_ptr<Strategy> make_no_dist_strategy(std::shared_ptr<Communicator> comm, std::string name) {
  return std::make_unique<detail::NoDistStrategy>(comm ? comm->rank() : 0, std::move(name));
}

}  // namespace mpiaccel
