// State dicts of replicated models (NoDist, DDP).

#include "state/replicated_state.hpp"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <unordered_map>
#include <unordered_set>

#include "mpiaccel/error.hpp"
#include "state/model_sync.hpp"
#include "state/optimizer_state.hpp"

namespace mpiaccel {
namespace {

// A 0-d tensor counts as one row; views below are [rows, ...].
at::Tensor as_rows(const at::Tensor& t) { return t.dim() == 0 ? t.reshape({1}) : t; }

ShardedTensor save_rows(std::string name, const at::Tensor& full, int rank, int size,
                        RowOwnership ownership) {
  const at::Tensor tensor = full.detach();
  const at::Tensor rows = as_rows(tensor);
  const int64_t n = rows.size(0);
  RowRange range;
  if (ownership == RowOwnership::Spread) range = even_row_range(n, size, rank);
  else range = RowRange{0, rank == 0 ? n : 0};
  ShardedTensor out;
  out.name = std::move(name);
  out.global_shape = tensor.sizes().vec();
  out.row_begin = range.begin;
  out.row_count = range.count;
  out.local = rows.narrow(0, range.begin, range.count).contiguous();
  return out;
}

ShardedTensor load_all(std::string name, const at::Tensor& full) {
  const at::Tensor tensor = full.detach();
  ShardedTensor out;
  out.name = std::move(name);
  out.global_shape = tensor.sizes().vec();
  out.row_begin = 0;
  out.row_count = tensor.dim() == 0 ? 1 : tensor.size(0);
  out.local = as_rows(tensor);
  return out;
}

// Parameter name by TensorImpl, to name optimizer slots after the model.
std::unordered_map<const void*, std::string> names_by_impl(const torch::nn::Module& model) {
  std::unordered_map<const void*, std::string> names;
  for (const auto& item : model.named_parameters(/*recurse=*/true))
    names.emplace(item.value().unsafeGetTensorImpl(), item.key());
  return names;
}

const std::string& name_of(const std::unordered_map<const void*, std::string>& names,
                           const at::Tensor& param) {
  auto it = names.find(param.unsafeGetTensorImpl());
  MPIACCEL_CHECK(it != names.end(),
                 "state dict: the optimizer holds a parameter of shape " + shape_text(param.sizes()) +
                     " that is not a parameter of the model; build the optimizer over "
                     "model->parameters()");
  return it->second;
}

}  // namespace

void add_model_rows(ShardedStateDict& dict, const torch::nn::Module& model, int rank, int size,
                    RowOwnership ownership) {
  for (const NamedTensor& t : module_tensors(model))
    dict.tensors.push_back(save_rows("model/" + t.name, t.tensor, rank, size, ownership));
}

void add_model_targets(ShardedStateDict& dict, torch::nn::Module& model, int rank, int size,
                       const std::vector<at::Tensor>& spread) {
  std::unordered_set<const void*> spread_impls;
  for (const at::Tensor& t : spread) spread_impls.insert(t.unsafeGetTensorImpl());
  for (const NamedTensor& t : module_tensors(model)) {
    if (t.is_buffer || !spread_impls.count(t.tensor.unsafeGetTensorImpl())) {
      dict.tensors.push_back(load_all("model/" + t.name, t.tensor));
      continue;
    }
    const at::Tensor rows = as_rows(t.tensor.detach());
    const RowRange range = even_row_range(rows.size(0), size, rank);
    ShardedTensor target = load_all("model/" + t.name, t.tensor);
    target.row_begin = range.begin;
    target.row_count = range.count;
    target.local = rows.narrow(0, range.begin, range.count);
    dict.tensors.push_back(std::move(target));
  }
}

ShardedStateDict replicated_state_dict(const torch::nn::Module& model,
                                       torch::optim::Optimizer& optimizer, int rank, int size,
                                       RowOwnership ownership) {
  ShardedStateDict dict;
  add_model_rows(dict, model, rank, size, ownership);
  const auto names = names_by_impl(model);
  const bool has_step = optimizer_type(optimizer) != OptimizerType::Sgd;
  for (const auto& group : optimizer.param_groups())
    for (const at::Tensor& p : group.params()) {
      const std::string& fqn = name_of(names, p);
      const auto slots = optimizer_slots(optimizer, p);
      for (const OptimizerSlot& slot : slots)
        dict.tensors.push_back(
            save_rows("optim/" + fqn + "/" + slot.name, slot.tensor, rank, size, ownership));
      if (has_step && !slots.empty())
        dict.tensors.push_back(save_rows("optim/" + fqn + "/step",
                                         at::scalar_tensor(optimizer_param_step(optimizer, p),
                                                           at::kLong),
                                         rank, size, ownership));
    }
  dict.attributes = optimizer_attributes(optimizer);
  return dict;
}

ReplicatedLoad replicated_load_targets(torch::nn::Module& model, torch::optim::Optimizer& optimizer) {
  ReplicatedLoad load;
  add_model_targets(load.targets, model, 0, 1);
  const auto names = names_by_impl(model);
  const bool has_step = optimizer_type(optimizer) != OptimizerType::Sgd;
  for (const auto& group : optimizer.param_groups())
    for (const at::Tensor& p : group.params()) {
      const std::string& fqn = name_of(names, p);
      for (const OptimizerSlot& slot : optimizer_slots(optimizer, p, /*create_missing=*/true))
        load.targets.tensors.push_back(load_all("optim/" + fqn + "/" + slot.name, slot.tensor));
      if (has_step) {
        at::Tensor step = at::scalar_tensor(optimizer_param_step(optimizer, p), at::kLong);
        load.targets.tensors.push_back(load_all("optim/" + fqn + "/step", step));
        load.steps.emplace_back(p, step);
      }
    }
  load.targets.attributes = optimizer_attributes(optimizer);
  return load;
}

void ReplicatedLoad::finish(torch::optim::Optimizer& optimizer) const {
  for (const auto& [param, step] : steps) set_optimizer_param_step(optimizer, param, step.item<int64_t>());
}

}  // namespace mpiaccel
