// TensorSplit: a tensor-parallel model's split, its state as whole tensors
// (tensor_split.hpp).

#include "parallelize/tensor_split.hpp"

#include <ATen/ATen.h>

#include <torch/nn/module.h>

#include <utility>

#include "mpiaccel/comm.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel::detail {
namespace {

// "model/<fqn>" and "optim/<fqn>/<slot>" -> <fqn>; "" for other names.
std::string parameter_of(const std::string& name) {
  if (name.rfind("model/", 0) == 0) return name.substr(6);
  if (name.rfind("optim/", 0) == 0) {
    const size_t slot = name.rfind('/');
    return slot > 6 ? name.substr(6, slot - 6) : "";
  }
  return "";
}

std::map<std::string, std::vector<int64_t>> parameter_shapes(const ShardedStateDict& state) {
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const ShardedTensor& t : state.tensors)
    if (t.name.rfind("model/", 0) == 0) shapes[t.name.substr(6)] = t.global_shape;
  return shapes;
}

std::vector<int64_t> with_rows(int64_t rows, const std::vector<int64_t>& whole_shape) {
  std::vector<int64_t> shape = whole_shape;
  shape[0] = rows;
  return shape;
}

}  // namespace

TensorSplit::TensorSplit(std::map<std::string, tp::ParamSplit> splits, std::unordered_set<const void*> split_params,
                         std::shared_ptr<Communicator> tp)
    : splits_(std::move(splits)), split_params_(std::move(split_params)), tp_(std::move(tp)) {}

bool TensorSplit::counts_in_grad_norm(const at::Tensor& param) const {
  return tp_->rank() == 0 || split_params_.count(param.unsafeGetTensorImpl()) > 0;
}

std::shared_ptr<ModelSplit> tensor_split_of(torch::nn::Module& model, std::shared_ptr<Communicator> tp) {
  std::map<std::string, tp::ParamSplit> splits = tp::split_parameters(model);
  MPIACCEL_CHECK(!splits.empty(), "[parallelism] tp_size " + std::to_string(tp->size()) +
                                      ", but the model has no split layers: the plan's tensor step must split "
                                      "them (tensor_parallelize, tp::parallelize_module)");
  std::unordered_set<const void*> split_params;
  for (const auto& item : model.named_parameters())
    if (splits.count(item.key())) split_params.insert(item.value().unsafeGetTensorImpl());
  return std::make_shared<TensorSplit>(std::move(splits), std::move(split_params), std::move(tp));
}

TensorSplit::Mapping TensorSplit::mapping_of(const ShardedTensor& t,
                                           const std::map<std::string, std::vector<int64_t>>& param_shapes) const {
  Mapping m;
  m.whole_shape = t.global_shape;
  m.first_whole_row = t.row_begin;
  m.whole_rows = t.row_count;
  const std::string param = parameter_of(t.name);
  const auto split = splits_.find(param);
  const auto shape = param_shapes.find(param);
  if (split == splits_.end() || shape == param_shapes.end() || shape->second != t.global_shape) return m;
  const int64_t ranks = tp_->size();
  switch (split->second.kind) {
    case tp::ParamSplit::Kind::Rows:
      m.way = Mapping::Way::AsIs;
      m.first_whole_row = tp_->rank() * t.global_shape[0] + t.row_begin;
      m.whole_shape[0] *= ranks;
      break;
    case tp::ParamSplit::Kind::Columns:
      m.way = Mapping::Way::Gathered;
      m.whole_shape[1] *= ranks;
      break;
    case tp::ParamSplit::Kind::FusedRows: {  // held as [blocks, rows of a block, ...]
      m.way = Mapping::Way::Gathered;
      const int64_t block_rows = t.global_shape[1] * ranks;
      m.first_whole_row = t.row_begin * block_rows;
      m.whole_rows = t.row_count * block_rows;
      m.whole_shape.erase(m.whole_shape.begin());
      m.whole_shape[0] = t.global_shape[0] * block_rows;
      break;
    }
  }
  return m;
}

ShardedStateDict TensorSplit::to_whole(ShardedStateDict state) {
  const auto shapes = parameter_shapes(state);
  for (ShardedTensor& t : state.tensors) {
    const Mapping m = mapping_of(t, shapes);
    t.global_shape = m.whole_shape;
    if (m.way == Mapping::Way::AsIs) {
      t.row_begin = m.first_whole_row;
      continue;
    }
    if (t.global_shape.empty()) {  // a 0-d tensor: the group's first rank writes it
      if (tp_->rank() != 0) {
        t.row_count = 0;
        t.local = at::empty({0}, t.local.options());
      }
      continue;
    }
    at::Tensor rows = t.local;  // Shared: the whole rows are this rank's own
    if (m.way == Mapping::Way::Gathered && m.whole_rows > 0) {
      // The group's slices of the same rows, side by side: whole rows.
      const at::NoGradGuard no_grad;
      rows = tp::gather_from_parallel(t.local, 1, tp_).reshape(with_rows(m.whole_rows, m.whole_shape));
    }
    const RowRange mine = even_row_range(m.whole_rows, tp_->size(), tp_->rank());
    t.local = rows.narrow(0, mine.begin, mine.count).contiguous();
    t.row_begin = m.first_whole_row + mine.begin;
    t.row_count = mine.count;
  }
  return state;
}

ShardedStateDict TensorSplit::whole_targets(ShardedStateDict state) {
  pending_.clear();  // of a load that failed
  const auto shapes = parameter_shapes(state);
  for (ShardedTensor& t : state.tensors) {
    const Mapping m = mapping_of(t, shapes);
    t.global_shape = m.whole_shape;
    if (m.way == Mapping::Way::AsIs) t.row_begin = m.first_whole_row;
    // A slice of whole rows, a 0-d tensor and no rows at all are read as they are.
    if (m.way == Mapping::Way::AsIs || t.global_shape.empty() || m.whole_rows == 0) continue;
    const RowRange mine = even_row_range(m.whole_rows, tp_->size(), tp_->rank());
    at::Tensor read = at::empty(with_rows(mine.count, m.whole_shape), t.local.options());
    pending_.push_back({m, t.local, read});
    t.local = read;
    t.row_begin = m.first_whole_row + mine.begin;
    t.row_count = mine.count;
  }
  return state;
}

void TensorSplit::finish_load() {
  std::vector<PendingLoad> pending = std::move(pending_);
  pending_.clear();
  for (PendingLoad& p : pending) {
    const int64_t rows = p.mapping.whole_rows;
    int64_t row_numel = 1;
    for (size_t d = 1; d < p.mapping.whole_shape.size(); ++d) row_numel *= p.mapping.whole_shape[d];
    std::vector<int64_t> counts;
    for (int r = 0; r < tp_->size(); ++r) counts.push_back(even_row_range(rows, tp_->size(), r).count * row_numel);
    at::Tensor whole = at::empty({rows * row_numel}, p.read.options());
    tp_->all_gather_uneven(whole, p.read.contiguous().view({-1}), counts);
    at::NoGradGuard no_grad;
    if (p.mapping.way == Mapping::Way::Shared) {
      p.target.copy_(whole.view(p.target.sizes()));
      continue;
    }
    // The whole rows as the slices' shape with dim 1 whole; this rank's slice of it.
    std::vector<int64_t> shape = p.target.sizes().vec();
    shape[1] *= tp_->size();
    p.target.copy_(tp::local_slice(whole.view(shape), 1, *tp_));
  }
}

}  // namespace mpiaccel::detail
