// ZeRO's ShardedStateDict: the same names and logical shapes as DDP's
// (src/state/replicated_state.hpp) and FSDP's, so checkpoints move between
// strategies and world sizes:
//   model/<fqn>         parameters and buffers: every rank holds them whole;
//                       saved spread over the ranks (even_row_range, as DDP),
//                       loaded whole on every rank;
//   optim/<fqn>/<slot>  the optimizer state of this rank's rows: exactly the
//                       rank's chunk_row_range, no communication;
//   optim/<fqn>/step    0-d int64, the per-parameter step (rank 0 saves it).

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include "mpiaccel/comm.hpp"
#include "mpiaccel/error.hpp"
#include "state/model_sync.hpp"
#include "state/optimizer_state.hpp"
#include "zero/zero_strategy.hpp"

namespace mpiaccel::detail {
namespace {

// A 0-d tensor counts as one row.
at::Tensor as_rows(const at::Tensor& t) { return t.dim() == 0 ? t.reshape({1}) : t; }

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

// Rows `range` of a tensor every rank holds whole (a copy for saving).
ShardedTensor save_part(std::string name, const at::Tensor& full, RowRange range) {
  const at::Tensor rows = as_rows(full.detach());
  return entry(std::move(name), full, range, rows.narrow(0, range.begin, range.count).contiguous());
}

// Every row of `full`, written in place by the load.
ShardedTensor load_whole(std::string name, const at::Tensor& full) {
  const at::Tensor rows = as_rows(full.detach());
  return entry(std::move(name), full, RowRange{0, rows.size(0)}, rows);
}

}  // namespace

ShardedStateDict ZeroStrategy::state_dict(torch::optim::Optimizer& optimizer) {
  require_prepared("state_dict()");
  const int rank = comm_->rank(), world = comm_->size();
  ShardedStateDict dict;
  for (const NamedTensor& t : module_tensors(*model_)) {
    const int64_t rows = t.tensor.dim() == 0 ? 1 : t.tensor.size(0);
    dict.tensors.push_back(save_part("model/" + t.name, t.tensor, even_row_range(rows, world, rank)));
  }
  const bool has_step = optimizer_kind(optimizer) != "sgd";
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!in_optimizer_[i]) continue;
    const auto slots = optimizer_slots(optimizer, shard_params_[i]);
    for (const OptimizerSlot& slot : slots)
      dict.tensors.push_back(entry("optim/" + names_[i] + "/" + slot.name, params_[i],
                                   shards_[i].ranges[rank], slot.tensor.detach().contiguous()));
    if (has_step && !slots.empty())
      dict.tensors.push_back(
          save_part("optim/" + names_[i] + "/step",
                    at::scalar_tensor(optimizer_param_step(optimizer, shard_params_[i]), at::kLong),
                    even_row_range(1, world, rank)));
  }
  dict.attributes = optimizer_attributes(optimizer);
  return dict;
}

ShardedStateDict ZeroStrategy::load_targets(torch::optim::Optimizer& optimizer) {
  require_prepared("load_targets()");
  const int rank = comm_->rank();
  ShardedStateDict dict;
  for (const NamedTensor& t : module_tensors(*model_))
    dict.tensors.push_back(load_whole("model/" + t.name, t.tensor));
  const bool has_step = optimizer_kind(optimizer) != "sgd";
  pending_steps_.clear();
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!in_optimizer_[i]) continue;
    // The optimizer's own state tensors (created fresh if it has not stepped
    // yet) are the destinations: the checkpoint fills them in place.
    for (const OptimizerSlot& slot : optimizer_slots(optimizer, shard_params_[i], /*create_missing=*/true)) {
      MPIACCEL_CHECK(slot.tensor.is_contiguous(), "ZeRO load: optimizer slot " + slot.name + " of " +
                                                      names_[i] + " is not contiguous");
      dict.tensors.push_back(entry("optim/" + names_[i] + "/" + slot.name, params_[i],
                                   shards_[i].ranges[rank], slot.tensor));
    }
    if (has_step) {
      at::Tensor step = at::scalar_tensor(optimizer_param_step(optimizer, shard_params_[i]), at::kLong);
      dict.tensors.push_back(load_whole("optim/" + names_[i] + "/step", step));
      pending_steps_.emplace_back(i, step);
    }
  }
  dict.attributes = optimizer_attributes(optimizer);
  return dict;
}

void ZeroStrategy::finish_load(torch::optim::Optimizer& optimizer) {
  require_prepared("finish_load()");
  for (const auto& [i, step] : pending_steps_)
    set_optimizer_param_step(optimizer, shard_params_[i], step.item<int64_t>());
  pending_steps_.clear();
  if (!offload_) return;  // the shard parameters are views of the loaded parameters
  // Offload: the host masters start again from the loaded parameters' rows.
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i)
    shard_params_[i].copy_(shard_view(params_[i], shards_[i], comm_->rank()));
}

}  // namespace mpiaccel::detail
