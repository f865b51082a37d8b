// FSDP state dicts: sharded (checkpoints) and full (export).
//
// Names and layout are those of every strategy (src/state): "model/<fqn>" at
// the full shape, "optim/<fqn>/<slot>" laid out like the parameter and
// "optim/<fqn>/step" (0-d). A sharded parameter's rows are this rank's chunk,
// so saving and loading move no data between ranks; with HYBRID_SHARD the
// replicas of a chunk split its rows for saving (every rank writes a part)
// and all read the whole chunk when loading. Buffers, frozen parameters and
// step counts are replicated: saved spread over the ranks, loaded whole.

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <unordered_map>

#include "fsdp/fsdp_strategy.hpp"
#include "mpiaccel/comm.hpp"
#include "mpiaccel/error.hpp"
#include "state/model_sync.hpp"
#include "state/optimizer_state.hpp"

namespace mpiaccel::detail {
namespace {

at::Tensor as_rows(const at::Tensor& t) { return t.dim() == 0 ? t.reshape({1}) : t; }

ShardedTensor replicated_save(std::string name, const at::Tensor& full, int rank, int size) {
  const at::Tensor rows = as_rows(full.detach());
  const RowRange range = even_row_range(rows.size(0), size, rank);
  return {std::move(name), full.sizes().vec(), range.begin, range.count,
          rows.narrow(0, range.begin, range.count).contiguous()};
}

ShardedTensor replicated_load(std::string name, const at::Tensor& full) {
  const at::Tensor rows = as_rows(full.detach());
  return {std::move(name), full.sizes().vec(), 0, rows.size(0), rows};
}

// A sharded tensor's rows: `shard` holds the chunk `chunk` of `global_shape`.
ShardedTensor sharded(std::string name, std::vector<int64_t> global_shape, RowRange chunk,
                      const at::Tensor& shard, int replica_rank, int replicas) {
  const RowRange part = even_row_range(chunk.count, replicas, replica_rank);
  return {std::move(name), std::move(global_shape), chunk.begin + part.begin, part.count,
          shard.detach().narrow(0, part.begin, part.count).contiguous()};
}

struct ShardRef {
  const FsdpParam* param;
  const FlatSlot* slot;
};

std::unordered_map<const void*, ShardRef> shards_by_impl(const FsdpEngine& engine, bool by_full) {
  std::unordered_map<const void*, ShardRef> out;
  for (const FsdpParam& p : engine.params()) {
    const FlatSlot* slot = &engine.units()[p.unit].layout.slots()[p.slot];
    out.emplace((by_full ? p.full : p.shard).unsafeGetTensorImpl(), ShardRef{&p, slot});
  }
  return out;
}

// The one walk of what an FSDP state dict names, in its order, for saving and
// loading alike: every model parameter and buffer, on_model("model/<fqn>",
// tensor, shard), then every tensor the optimizer steps, on_optim(
// "optim/<fqn>/", tensor, shard). `shard` is null for what FSDP does not
// shard (buffers, frozen parameters). The optimizer holds the shard of a
// sharded parameter, so its tensors are named through the model's: by the
// shard's TensorImpl, or the parameter's own when it is not sharded; a tied
// weight keeps its first name. `who` names the caller in the error.
template <class OnModel, class OnOptim>
void walk_state(const FsdpEngine& engine, const torch::nn::Module& model,
                const torch::optim::Optimizer& optimizer, const std::string& who,
                OnModel&& on_model, OnOptim&& on_optim) {
  const auto by_full = shards_by_impl(engine, true);
  std::unordered_map<const void*, std::string> name_of;  // optimizer tensor -> fqn
  for (const NamedTensor& t : module_tensors(model)) {
    auto it = t.is_buffer ? by_full.end() : by_full.find(t.tensor.unsafeGetTensorImpl());
    const ShardRef* ref = it == by_full.end() ? nullptr : &it->second;
    on_model("model/" + t.name, t.tensor, ref);
    name_of.emplace((ref ? ref->param->shard : t.tensor).unsafeGetTensorImpl(), t.name);
  }
  const auto by_shard = shards_by_impl(engine, false);
  for (const auto& group : optimizer.param_groups())
    for (const at::Tensor& p : group.params()) {
      auto name = name_of.find(p.unsafeGetTensorImpl());
      MPIACCEL_CHECK(name != name_of.end(), who + ": the optimizer holds a tensor that is "
                                                  "neither a shard nor a parameter of the model");
      auto ref = by_shard.find(p.unsafeGetTensorImpl());
      on_optim("optim/" + name->second + "/", p, ref == by_shard.end() ? nullptr : &ref->second);
    }
}

}  // namespace

ShardedStateDict FsdpStrategy::state_dict(torch::optim::Optimizer& optimizer) {
  require_prepared("state_dict()");
  const int replica_rank = engine_->comms().replica ? engine_->comms().replica->rank() : 0;
  const int replicas = engine_->comms().replica ? engine_->comms().replica->size() : 1;
  const int rank = comm_->rank(), size = comm_->size();
  const bool has_step = optimizer_type(optimizer) != OptimizerType::Sgd;
  ShardedStateDict dict;
  walk_state(
      *engine_, *model_, optimizer, "FSDP state_dict",
      [&](const std::string& name, const at::Tensor& tensor, const ShardRef* ref) {
        dict.tensors.push_back(ref ? sharded(name, ref->slot->shape, ref->slot->local,
                                             ref->param->shard, replica_rank, replicas)
                                   : replicated_save(name, tensor, rank, size));
      },
      [&](const std::string& prefix, const at::Tensor& p, const ShardRef* ref) {
        const auto slots = optimizer_slots(optimizer, p);
        for (const OptimizerSlot& slot : slots)
          dict.tensors.push_back(ref ? sharded(prefix + slot.name, ref->slot->shape,
                                               ref->slot->local, slot.tensor, replica_rank,
                                               replicas)
                                     : replicated_save(prefix + slot.name, slot.tensor, rank, size));
        if (has_step && !slots.empty())
          dict.tensors.push_back(replicated_save(
              prefix + "step", at::scalar_tensor(optimizer_param_step(optimizer, p), at::kLong),
              rank, size));
      });
  dict.attributes = optimizer_attributes(optimizer);
  return dict;
}

ShardedStateDict FsdpStrategy::load_targets(torch::optim::Optimizer& optimizer) {
  require_prepared("load_targets()");
  const bool has_step = optimizer_type(optimizer) != OptimizerType::Sgd;
  ShardedStateDict targets;
  pending_steps_.clear();
  // A shard's destination is the tensor itself: this rank's whole chunk (every
  // replica of HYBRID_SHARD reads it all).
  auto shard_target = [](std::string name, const FlatSlot& s, const at::Tensor& tensor) {
    return ShardedTensor{std::move(name), s.shape, s.local.begin, s.local.count, tensor.detach()};
  };
  walk_state(
      *engine_, *model_, optimizer, "FSDP load",
      [&](const std::string& name, const at::Tensor& tensor, const ShardRef* ref) {
        targets.tensors.push_back(ref ? shard_target(name, *ref->slot, ref->param->shard)
                                      : replicated_load(name, tensor));
      },
      [&](const std::string& prefix, const at::Tensor& p, const ShardRef* ref) {
        for (const OptimizerSlot& slot : optimizer_slots(optimizer, p, /*create_missing=*/true))
          targets.tensors.push_back(ref ? shard_target(prefix + slot.name, *ref->slot, slot.tensor)
                                        : replicated_load(prefix + slot.name, slot.tensor));
        if (has_step) {
          at::Tensor step = at::scalar_tensor(optimizer_param_step(optimizer, p), at::kLong);
          targets.tensors.push_back(replicated_load(prefix + "step", step));
          pending_steps_.emplace_back(p, step);
        }
      });
  targets.attributes = optimizer_attributes(optimizer);
  return targets;
}

void FsdpStrategy::finish_load(torch::optim::Optimizer& optimizer) {
  require_prepared("finish_load()");
  for (const auto& [param, step] : pending_steps_)
    set_optimizer_param_step(optimizer, param, step.item<int64_t>());
  pending_steps_.clear();
  // Full parameters gathered before the load hold the old values.
  engine_->refresh_gathered();
}

std::vector<std::pair<std::string, at::Tensor>> FsdpStrategy::full_state_dict() {
  require_prepared("full_state_dict()");
  const bool root = comm_->rank() == 0;
  std::unordered_map<const void*, at::Tensor> full_of;
  for (size_t k = 0; k < engine_->units().size(); ++k) {
    std::vector<at::Tensor> tensors = engine_->gather_copy(k);  // collective over the shard group
    const FsdpUnit& u = engine_->units()[k];
    if (root)
      for (size_t s = 0; s < u.params.size(); ++s)
        full_of.emplace(engine_->params()[u.params[s]].full.unsafeGetTensorImpl(), tensors[s].cpu());
  }
  std::vector<std::pair<std::string, at::Tensor>> out;
  if (!root) return out;
  for (const NamedTensor& t : module_tensors(*model_)) {
    auto it = full_of.find(t.tensor.unsafeGetTensorImpl());
    out.emplace_back(t.name, it != full_of.end() ? it->second : t.tensor.detach().cpu().clone());
  }
  return out;
}

}  // namespace mpiaccel::detail
