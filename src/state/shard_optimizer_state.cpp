// Optimizers over row shards (see shard_optimizer_state.hpp).

#include "state/shard_optimizer_state.hpp"

#include <ATen/ATen.h>
#include <torch/optim/optimizer.h>

#include <unordered_map>

#include "mpiaccel/error.hpp"
#include "state/model_sync.hpp"
#include "state/optimizer_state.hpp"

namespace mpiaccel::detail {
namespace {

ShardedTensor entry(std::string name, const at::Tensor& full_shape_of, RowRange range,
                    at::Tensor local) {
  ShardedTensor out;
  out.name = std::move(name);
  out.global_shape = full_shape_of.sizes().vec();
  out.row_begin = range.begin;
  out.row_count = range.count;
  out.local = std::move(local);
  return out;
}

}  // namespace

void RowShardedParams::repoint_optimizer(torch::optim::Optimizer& optimizer, const std::string& who) {
  MPIACCEL_CHECK(optimizer.state().empty(),
                 who + ": the optimizer already has state (it has stepped); prepare the "
                       "strategy before the first optimizer step");
  std::unordered_map<const void*, size_t> index;
  for (size_t i = 0; i < params.size(); ++i) index.emplace(params[i].unsafeGetTensorImpl(), i);
  in_optimizer.assign(params.size(), 0);
  for (auto& group : optimizer.param_groups())
    for (at::Tensor& p : group.params()) {
      auto it = index.find(p.unsafeGetTensorImpl());
      if (it == index.end()) {
        MPIACCEL_CHECK(!p.requires_grad(),
                       who + ": the optimizer holds a tensor of shape " + shape_text(p.sizes()) +
                           " that is not a parameter of the model; build the optimizer over "
                           "model->parameters()");
        continue;  // frozen: never has a gradient, never steps
      }
      MPIACCEL_CHECK(!in_optimizer[it->second], who + ": parameter " + names[it->second] +
                                                    " appears twice in the optimizer's parameter groups");
      in_optimizer[it->second] = 1;
      p = shard_params[it->second];
    }
}

void add_shard_optimizer_state(ShardedStateDict& dict, torch::optim::Optimizer& optimizer,
                               const RowShardedParams& sharded, int rank, int world, bool writes) {
  const bool has_step = optimizer_type(optimizer) != OptimizerType::Sgd;
  // A rank that does not write still names every tensor (creation is
  // collective), with no rows.
  const auto rows_of = [writes](RowRange range, const at::Tensor& local) {
    if (writes) return std::make_pair(range, local.contiguous());
    const at::Tensor rows = local.dim() == 0 ? local.reshape({1}) : local;
    return std::make_pair(RowRange{0, 0}, rows.narrow(0, 0, 0).contiguous());
  };
  for (size_t i = 0; i < sharded.params.size(); ++i) {
    if (!sharded.in_optimizer[i]) continue;
    const at::Tensor& shard_param = sharded.shard_params[i];
    const auto slots = optimizer_slots(optimizer, shard_param);
    for (const OptimizerSlot& slot : slots) {
      auto [range, local] = rows_of(sharded.shards[i].ranges[rank], slot.tensor.detach());
      dict.tensors.push_back(
          entry("optim/" + sharded.names[i] + "/" + slot.name, sharded.params[i], range, local));
    }
    if (has_step && !slots.empty()) {
      const RowRange mine = even_row_range(1, world, rank);
      const at::Tensor step = at::scalar_tensor(optimizer_param_step(optimizer, shard_param), at::kLong);
      auto [range, local] = rows_of(mine, step.reshape({1}).narrow(0, 0, mine.count));
      dict.tensors.push_back(entry("optim/" + sharded.names[i] + "/step", step, range, local));
    }
  }
}

PendingSteps add_shard_optimizer_targets(ShardedStateDict& dict, torch::optim::Optimizer& optimizer,
                                         const RowShardedParams& sharded, int rank) {
  const bool has_step = optimizer_type(optimizer) != OptimizerType::Sgd;
  PendingSteps steps;
  for (size_t i = 0; i < sharded.params.size(); ++i) {
    if (!sharded.in_optimizer[i]) continue;
    const at::Tensor& shard_param = sharded.shard_params[i];
    // The optimizer's own state tensors are the destinations: the checkpoint
    // fills them in place.
    for (const OptimizerSlot& slot : optimizer_slots(optimizer, shard_param, /*create_missing=*/true)) {
      MPIACCEL_CHECK(slot.tensor.is_contiguous(), "load: optimizer slot " + slot.name + " of " +
                                                      sharded.names[i] + " is not contiguous");
      dict.tensors.push_back(entry("optim/" + sharded.names[i] + "/" + slot.name, sharded.params[i],
                                   sharded.shards[i].ranges[rank], slot.tensor));
    }
    if (has_step) {
      at::Tensor step = at::scalar_tensor(optimizer_param_step(optimizer, shard_param), at::kLong);
      dict.tensors.push_back(entry("optim/" + sharded.names[i] + "/step", step, RowRange{0, 1},
                                   step.reshape({1})));
      steps.emplace_back(shard_param, step);
    }
  }
  return steps;
}

void apply_pending_steps(torch::optim::Optimizer& optimizer, const PendingSteps& steps) {
  for (const auto& [shard_param, step] : steps)
    set_optimizer_param_step(optimizer, shard_param, step.item<int64_t>());
}

}  // namespace mpiaccel::detail
