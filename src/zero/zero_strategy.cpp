// ZeRO stages 1 and 2 (see zero_strategy.hpp; state dicts in zero_state.cpp).

#include "zero/zero_strategy.hpp"

#include <ATen/core/grad_mode.h>
#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/optim/adamw.h>
#include <torch/optim/optimizer.h>

#include <cmath>
#include <unordered_map>

#include "grad_sync/grad_math.hpp"
#include "mpiaccel/comm.hpp"
#include "mpiaccel/comm_hook.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/optim.hpp"
#include "mpiaccel/zero.hpp"
#include "state/model_sync.hpp"
#include "state/optimizer_state.hpp"
#include "state/param_list.hpp"
#include "runtime/device_streams.hpp"

namespace mpiaccel {
namespace detail {
namespace {

int64_t megabytes_to_bytes(double mb, const char* key) {
  MPIACCEL_CHECK(mb > 0 && std::isfinite(mb),
                 std::string("[zero] ") + key + " must be > 0 (MiB), got " + std::to_string(mb));
  return std::max<int64_t>(1, static_cast<int64_t>(mb * 1024.0 * 1024.0));
}

}  // namespace

ZeroStrategy::ZeroStrategy(const ZeroConfig& config, std::shared_ptr<Communicator> comm,
                           const PrecisionPolicy& precision)
    : config_(config), reduce_dtype_(wire_dtype(precision.reduce_dtype)), comm_(std::move(comm)) {
  MPIACCEL_CHECK(comm_, "ZeRO: no communicator");
  MPIACCEL_CHECK(config_.stage == 1 || config_.stage == 2,
                 "ZeroStrategy runs [zero] stage 1 or 2, got " + std::to_string(config_.stage) +
                     " (stage 0 is DDP and stage 3 FSDP full shard: make_strategy routes them)");
  MPIACCEL_CHECK(config_.offload_param == OffloadChoice::None,
                 "[zero] offload_param = " + name_of(config_.offload_param) +
                     " needs sharded parameters (stage 3): use [distributed] strategy = fsdp "
                     "with [fsdp] cpu_offload = true, or set offload_param = none");
  megabytes_to_bytes(config_.reduce_bucket_mb, "reduce_bucket_mb");
  megabytes_to_bytes(config_.allgather_bucket_mb, "allgather_bucket_mb");
  offload_ = config_.offload_optimizer == OffloadChoice::Cpu;
}

void ZeroStrategy::require_prepared(const char* what) const {
  MPIACCEL_CHECK(model_ && gather_, std::string("ZeRO: ") + what + " before prepare()");
}

void ZeroStrategy::prepare(std::shared_ptr<torch::nn::Module> model,
                           std::shared_ptr<torch::optim::Optimizer> optimizer) {
  MPIACCEL_CHECK(model && optimizer, "ZeRO prepare: needs a model and an optimizer");
  MPIACCEL_CHECK(!model_, "ZeRO prepare: already prepared; prepare a strategy once");
  check_same_model_across_ranks(*comm_, *model);
  broadcast_module_state(*comm_, *model);
  ParamList list = trainable_params(*model);
  MPIACCEL_CHECK(!list.params.empty(), "ZeRO: the model has no parameter that requires grad");
  sharded_.params = std::move(list.params);
  sharded_.names = std::move(list.names);
  const int rank = comm_->rank(), world = comm_->size();
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < sharded_.params.size(); ++i) {
    const at::Tensor& p = sharded_.params[i];
    MPIACCEL_CHECK(p.is_contiguous(), "ZeRO: parameter " + sharded_.names[i] +
                                          " is not contiguous; its dim-0 rows are sharded in place");
    sharded_.shards.push_back(make_param_shard(p, world));
    const at::Tensor rows = shard_view(p, sharded_.shards.back(), rank);
    if (offload_) {
      // fp32 master rows in host memory; pinned when the parameter is on a
      // GPU so the copies each step can be asynchronous.
      at::Tensor master = staging_empty(rows.sizes(), at::kFloat, p.device());
      master.copy_(rows);
      master_index_.emplace(master.unsafeGetTensorImpl(), i);
      sharded_.shard_params.push_back(master);
      device_rows_.push_back(rows);
      host_grads_.push_back(staging_empty(rows.sizes(), at::kFloat, p.device()).zero_());
    } else {
      sharded_.shard_params.push_back(rows);
    }
  }
  sharded_.repoint_optimizer(*optimizer, "ZeRO prepare");

  const int64_t reduce_bytes = megabytes_to_bytes(config_.reduce_bucket_mb, "reduce_bucket_mb");
  if (config_.stage == 1) {
    ReducerOptions options;
    options.bucket_bytes = reduce_bytes;
    // .grad IS the bucket view: full gradients are held once (4Ψ in fp32), not twice.
    options.gradient_as_bucket_view = true;
    options.hook = make_all_reduce_hook(reduce_dtype_);
    all_reducer_ = std::make_unique<Reducer>(sharded_.params, sharded_.names, comm_, options);
    grad_sync_ = all_reducer_.get();
  } else {
    shard_reducer_ = std::make_unique<GradShardReducer>(sharded_.params, sharded_.names, sharded_.shards, comm_,
                                                        kFirstBucketBytes, reduce_bytes, reduce_dtype_);
    grad_sync_ = shard_reducer_.get();
  }
  grad_sync_->set_gradient_sync(sync_);
  gather_ = std::make_unique<ParamGather>(
      sharded_.params, sharded_.shards, comm_, megabytes_to_bytes(config_.allgather_bucket_mb, "allgather_bucket_mb"));
  model_ = std::move(model);
}

void ZeroStrategy::set_gradient_sync(bool enabled) {
  sync_ = enabled;
  if (grad_sync_) grad_sync_->set_gradient_sync(enabled);
}

void ZeroStrategy::after_backward() {
  require_prepared("after_backward()");
  grad_sync_->after_backward();
}

at::Tensor ZeroStrategy::device_shard_grad(size_t i) const {
  if (shard_reducer_) return shard_reducer_->shard_grad(i);
  const at::Tensor& grad = sharded_.params[i].grad();
  if (!grad.defined()) return {};
  return shard_view(grad, sharded_.shards[i], comm_->rank());
}

double ZeroStrategy::grad_norm() {
  require_prepared("grad_norm()");
  // Stage 1: every rank holds the same averaged gradients.
  if (all_reducer_) return local_grad_norm(counted_only(sharded_.params, sharded_.params));
  std::vector<at::Tensor> shard_grads;
  for (size_t i = 0; i < sharded_.params.size(); ++i) shard_grads.push_back(shard_reducer_->shard_grad(i));
  return sharded_grad_norm(*comm_, counted_only(sharded_.params, shard_grads));
}

void ZeroStrategy::scale_grads(double factor) {
  require_prepared("scale_grads()");
  if (all_reducer_) {
    scale_local_grads(sharded_.params, factor);
    return;
  }
  for (size_t i = 0; i < sharded_.params.size(); ++i) shard_reducer_->shard_grad(i).detach().mul_(factor);
}

void ZeroStrategy::attach_shard_grads() {
  if (!offload_) {
    for (size_t i = 0; i < sharded_.params.size(); ++i) sharded_.shard_params[i].mutable_grad() = device_shard_grad(i);
    return;
  }
  // Device -> pinned host on the copy stream: each gradient lands while the
  // host steps the ones before it (offloaded_step).
  for (size_t i = 0; i < sharded_.params.size(); ++i) {
    const at::Tensor grad = device_shard_grad(i);
    if (!grad.defined()) {
      sharded_.shard_params[i].mutable_grad() = at::Tensor();
      continue;
    }
    copies_.to_host(host_grads_[i], grad);
    sharded_.shard_params[i].mutable_grad() = host_grads_[i];
  }
}

void ZeroStrategy::offloaded_step(torch::optim::Optimizer& optimizer) {
  // A stepped master goes back up at once, into the parameter's own rows,
  // while the host steps the next one.
  const auto upload = [this](const at::Tensor& master) {
    copies_.to_device(device_rows_[master_index_.at(master.unsafeGetTensorImpl())], master);
  };
  if (auto* adamw = dynamic_cast<torch::optim::AdamW*>(&optimizer)) {
    host_adamw_step(*adamw, {[this](const at::Tensor& p) { copies_.wait_landed(p.grad()); }, upload});
  } else {
    copies_.wait_all_landed();
    optimizer.step();
    for (const at::Tensor& master : sharded_.shard_params) upload(master);
  }
  copies_.finish();
}

void ZeroStrategy::step(torch::optim::Optimizer& optimizer) {
  require_prepared("step()");
  at::NoGradGuard no_grad;
  attach_shard_grads();
  if (offload_) offloaded_step(optimizer);
  else optimizer.step();
  // Every rank's updated rows, from the parameters themselves (offload: the
  // masters' copies just landed there).
  gather_->gather(offload_ ? device_rows_ : sharded_.shard_params);
}

void ZeroStrategy::zero_grad(torch::optim::Optimizer& optimizer) {
  require_prepared("zero_grad()");
  if (all_reducer_) all_reducer_->zero_grad();  // as the LibTorch's Optimizer::zero_grad()
  else shard_reducer_->zero_grad();
  // The optimizer's rows get their gradients again at the next step
  // (attach_shard_grads): no pass over their bytes here.
  for (const at::Tensor& row : sharded_.shard_params) row.mutable_grad() = at::Tensor();
  // Parameters of the optimizer that the model holds frozen.
  for (const auto& group : optimizer.param_groups()) zero_local_grads(group.params());
}

Strategy::MemoryAccount ZeroStrategy::memory(torch::optim::Optimizer& optimizer) const {
  require_prepared("memory()");
  MemoryAccount account;
  std::unordered_map<const void*, int64_t> distinct;
  for (const auto& item : model_->named_parameters(true))
    distinct.emplace(item.value().unsafeGetTensorImpl(), item.value().numel() * item.value().element_size());
  for (const auto& [impl, bytes] : distinct) account.param_bytes += bytes;
  if (offload_) account.param_bytes += tensor_bytes(sharded_.shard_params);  // host masters
  if (all_reducer_) {
    // Bucket views are the gradients (gradient_as_bucket_view).
    for (int64_t bytes : all_reducer_->bucket_sizes()) account.grad_bytes += bytes;
    account.grad_bytes += all_reducer_->wire_bytes();  // reduce_dtype copies, if any
  } else {
    account.grad_bytes = shard_reducer_->shard_grad_bytes() + shard_reducer_->full_grad_bytes();
  }
  account.grad_bytes += tensor_bytes(host_grads_);
  account.optimizer_bytes = optimizer_state_bytes(optimizer);
  return account;
}

Reducer& ZeroStrategy::all_reducer() {
  MPIACCEL_CHECK(all_reducer_, "ZeRO: the all-reduce reducer exists in stage 1 after prepare()");
  return *all_reducer_;
}

GradShardReducer& ZeroStrategy::shard_reducer() {
  MPIACCEL_CHECK(shard_reducer_, "ZeRO: the reduce-scatter reducer exists in stage 2 after prepare()");
  return *shard_reducer_;
}

}  // namespace detail

std::unique_ptr<Strategy> make_zero_strategy(const ZeroConfig& config,
                                             std::shared_ptr<Communicator> comm,
                                             const PrecisionPolicy& precision) {
  // Stage 0 (DDP) and 3 (FSDP full shard) are routed by make_strategy.
  return std::make_unique<detail::ZeroStrategy>(config, std::move(comm), precision);
}

}  // namespace mpiaccel
