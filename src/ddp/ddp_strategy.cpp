// DDP: replicated model, gradients averaged by the bucketed Reducer.

#include "ddp/ddp_strategy.hpp"

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include "grad_sync/grad_math.hpp"
#include "mpiaccel/comm.hpp"
#include "mpiaccel/comm_hook.hpp"
#include "mpiaccel/ddp.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/log.hpp"
#include "state/model_sync.hpp"
#include "state/optimizer_state.hpp"
#include "state/param_list.hpp"

namespace mpiaccel {
namespace detail {

DdpStrategy::DdpStrategy(const DdpConfig& config, std::shared_ptr<Communicator> comm,
                         const PrecisionPolicy& precision)
    : config_(config), precision_(precision), comm_(std::move(comm)) {
  MPIACCEL_CHECK(comm_, "DDP: no communicator");
  reducer_options(config_);  // validates
}

ReducerOptions DdpStrategy::reducer_options(const DdpConfig& config, const PrecisionPolicy& precision) {
  MPIACCEL_CHECK(config.bucket_cap_mb > 0, "[ddp] bucket_cap_mb must be > 0, got " +
                                               std::to_string(config.bucket_cap_mb));
  ReducerOptions options;
  options.bucket_bytes =
      std::max<int64_t>(1, static_cast<int64_t>(config.bucket_cap_mb * 1024.0 * 1024.0));
  options.find_unused_parameters = config.find_unused_parameters;
  options.gradient_as_bucket_view = config.gradient_as_bucket_view;
  options.static_graph = config.static_graph;
  options.hook = make_comm_hook(config, wire_dtype(precision.reduce_dtype));
  return options;
}

void DdpStrategy::require_prepared(const char* what) const {
  MPIACCEL_CHECK(reducer_ && model_, std::string("DDP: ") + what + " before prepare()");
}

void DdpStrategy::prepare(std::shared_ptr<torch::nn::Module> model,
                          std::shared_ptr<torch::optim::Optimizer> optimizer) {
  MPIACCEL_CHECK(model, "DDP prepare: no model");
  MPIACCEL_CHECK(!reducer_, "DDP prepare: already prepared; prepare a strategy once");
  check_same_model_across_ranks(*comm_, *model);
  broadcast_module_state(*comm_, *model);
  ParamList list = trainable_params(*model);
  // Node sharing re-points the optimizer; without one, every rank keeps its replica.
  if (config_.node_shared_params && optimizer && comm_->size() > 1)
    node_shared_ = NodeSharedParams::create(list.params, list.names, comm_, *optimizer);
  if (node_shared_ && comm_->rank() == 0)
    log_info("DDP: the " + std::to_string(node_shared_->node_size()) + " ranks of each node " +
             "share one copy of the parameters in node-shared memory; each steps its rows "
             "([ddp] node_shared_params)");
  ReducerOptions options = reducer_options(config_, precision_);
  if (hook_) options.hook = hook_;
  if (comm_->rank() == 0 && options.hook->name() != "all_reduce")
    log_info("DDP: gradient buckets go through the " + options.hook->name() + " comm hook");
  reducer_ = std::make_unique<Reducer>(std::move(list.params), std::move(list.names), comm_, options);
  reducer_->set_gradient_sync(sync_);
  model_ = std::move(model);
}

void DdpStrategy::register_comm_hook(std::shared_ptr<CommHook> hook) {
  MPIACCEL_CHECK(hook, "DDP register_comm_hook: no hook");
  MPIACCEL_CHECK(!reducer_, "DDP register_comm_hook: after prepare(); register the hook before it");
  hook_ = std::move(hook);
}

void DdpStrategy::set_gradient_sync(bool enabled) {
  sync_ = enabled;
  if (reducer_) reducer_->set_gradient_sync(enabled);
}

bool DdpStrategy::gradient_sync() const { return sync_; }

void DdpStrategy::after_backward() {
  require_prepared("after_backward()");
  reducer_->after_backward();
  // The optimizer's row views see the averaged gradients before any unscaling or clipping.
  if (node_shared_ && sync_) node_shared_->attach_grads();
}

double DdpStrategy::grad_norm() {
  require_prepared("grad_norm()");
  // Node-shared: each rank unscales and applies only its rows, so the norm is
  // summed over the ranks' rows. Otherwise gradients are averaged and
  // identical on every rank: the local norm is the global one.
  if (node_shared_) return node_shared_->grad_norm([this](const at::Tensor& p) { return counted_in_grad_norm(p); });
  return local_grad_norm(counted_only(reducer_->grad_params(), reducer_->grad_params()));
}

void DdpStrategy::scale_grads(double factor) {
  require_prepared("scale_grads()");
  if (node_shared_) node_shared_->scale_grads(factor);
  else scale_local_grads(reducer_->grad_params(), factor);
}

void DdpStrategy::step(torch::optim::Optimizer& optimizer) {
  require_prepared("step()");
  if (node_shared_) node_shared_->step(optimizer);
  else optimizer.step();
}

void DdpStrategy::zero_grad(torch::optim::Optimizer& optimizer) {
  require_prepared("zero_grad()");
  // As the LibTorch's Optimizer::zero_grad(); the next backward binds the
  // gradients to their bucket views again.
  reducer_->zero_grad();
  // Optimizer parameters outside the reducer (frozen in the model) too.
  for (const auto& group : optimizer.param_groups())
    for (const auto& p : group.params())
      if (!reducer_->manages(p) && !(node_shared_ && node_shared_->holds(p))) zero_local_grads({p});
}

ShardedStateDict DdpStrategy::state_dict(torch::optim::Optimizer& optimizer) {
  require_prepared("state_dict()");
  ShardedStateDict dict;
  if (!node_shared_) {
    dict = replicated_state_dict(*model_, optimizer, comm_->rank(), comm_->size(), RowOwnership::Spread);
  } else {
    add_model_rows(dict, *model_, comm_->rank(), comm_->size());
    node_shared_->add_optimizer_state(dict, optimizer);
    dict.attributes = optimizer_attributes(optimizer);
  }
  reducer_->hook().add_state(dict);
  return dict;
}

ShardedStateDict DdpStrategy::load_targets(torch::optim::Optimizer& optimizer) {
  require_prepared("load_targets()");
  ShardedStateDict dict;
  if (!node_shared_) {
    pending_load_ = replicated_load_targets(*model_, optimizer);
    dict = pending_load_.targets;
  } else {
    // Each rank fills its rows of its node's shared parameters and of the optimizer state.
    add_model_targets(dict, *model_, node_shared_->node_rank(), node_shared_->node_size(),
                      node_shared_->params());
    node_shared_->add_optimizer_targets(dict, optimizer);
    dict.attributes = optimizer_attributes(optimizer);
  }
  reducer_->hook().add_load_targets(dict);
  return dict;
}

void DdpStrategy::finish_load(torch::optim::Optimizer& optimizer) {
  require_prepared("finish_load()");
  reducer_->hook().finish_load();
  if (node_shared_) {
    node_shared_->finish_load(optimizer);
    return;
  }
  // Every rank read every row of the same file: replicas agree without communication.
  pending_load_.finish(optimizer);
  pending_load_ = ReplicatedLoad{};
}

Strategy::MemoryAccount DdpStrategy::memory(torch::optim::Optimizer& optimizer) const {
  require_prepared("memory()");
  MemoryAccount account;
  std::vector<at::Tensor> all_params;
  for (const auto& item : model_->named_parameters(true)) all_params.push_back(item.value());
  account.param_bytes = tensor_bytes(all_params);
  // Node-shared: the node holds the trainable parameters once; this rank's
  // share is the rows it updates.
  if (node_shared_)
    account.param_bytes += node_shared_->own_param_bytes() - node_shared_->shared_param_bytes();
  int64_t buckets = 0;
  for (int64_t bytes : reducer_->bucket_sizes()) buckets += bytes;
  // Bucket views ARE the gradients; otherwise .grad tensors come on top. A
  // reduce_dtype cast adds the buckets' wire copies.
  account.grad_bytes = buckets + reducer_->wire_bytes() + reducer_->hook().state_bytes() +
                       (config_.gradient_as_bucket_view ? 0 : grad_bytes(reducer_->grad_params()));
  account.optimizer_bytes = optimizer_state_bytes(optimizer);
  return account;
}

Reducer& DdpStrategy::reducer() {
  require_prepared("reducer()");
  return *reducer_;
}

}  // namespace detail

std::unique_ptr<Strategy> make_ddp_strategy(const DdpConfig& config,
                                            std::shared_ptr<Communicator> comm,
                                            const PrecisionPolicy& precision) {
  return std::make_unique<detail::DdpStrategy>(config, std::move(comm), precision);
}

}  // namespace mpiaccel
