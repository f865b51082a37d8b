// tp::Linear and tp::Embedding, split by a Style, and the layers that are
// split from the start (tensor_parallel.hpp).

#include <ATen/ATen.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include <string>
#include <utility>
#include <vector>

#include "mpiaccel/comm.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/tensor_parallel.hpp"
#include "tensor_parallel/deferred_linear.hpp"

namespace mpiaccel::tp {
namespace {

// This rank's part of a whole weight or bias as `style` splits it; `is_bias`
// picks the bias's rule (whole under Rowwise).
at::Tensor part_of(const at::Tensor& full, const Style& style, const Communicator& group, bool is_bias) {
  switch (style.kind) {
    case Style::Kind::Colwise:
      return local_rows_of_blocks(full, style.fused_blocks, group);
    case Style::Kind::Rowwise:
      return is_bias ? full : local_slice(full, 1, group);
    case Style::Kind::VocabRows:
      return local_slice(full, 0, group);
  }
  return full;
}

// The shape a split parameter is held in: fused blocks as [blocks, rows, ...].
std::vector<int64_t> held_shape(const at::Tensor& part, const Style& style) {
  std::vector<int64_t> shape = part.sizes().vec();
  if (style.kind == Style::Kind::Colwise && style.fused_blocks > 1) {
    shape[0] /= style.fused_blocks;
    shape.insert(shape.begin(), style.fused_blocks);
  }
  return shape;
}

// Replaces `param`'s values by its part, keeping the tensor (optimizers
// built later see the part; the module's registry holds the same tensor).
void keep_part(at::Tensor& param, const Style& style, const Communicator& group, bool is_bias) {
  if (!param.defined()) return;
  at::NoGradGuard no_grad;
  const at::Tensor part = part_of(param.detach(), style, group, is_bias);
  param.set_data(part.reshape(held_shape(part, style)).clone(at::MemoryFormat::Contiguous));
}

// A fused parameter's 2-D (1-D for a bias) view, as the layer computes with it.
at::Tensor flat_blocks(const at::Tensor& param, const Style& style) {
  if (!param.defined() || style.kind != Style::Kind::Colwise || style.fused_blocks == 1) return param;
  return param.flatten(0, 1);
}

void copy_part(at::Tensor& target, const at::Tensor& full, const Style& style, const Communicator* group,
               bool is_bias, const char* what) {
  const at::Tensor held = group ? flat_blocks(target, style) : target;  // as the layer computes with it
  MPIACCEL_CHECK(full.defined() && full.dim() == held.dim(),
                 std::string("tensor parallelism: load_full needs the whole ") + what);
  const at::Tensor part = group ? part_of(full, style, *group, is_bias) : full;
  MPIACCEL_CHECK(part.sizes() == held.sizes(),
                 std::string("tensor parallelism: the whole ") + what + " has the wrong shape for this layer");
  at::NoGradGuard no_grad;
  target.copy_(part.reshape(target.sizes()));
}

thread_local bool whole_sequence = false;

}  // namespace

WholeSequence::WholeSequence() : previous_(whole_sequence) { whole_sequence = true; }
WholeSequence::~WholeSequence() { whole_sequence = previous_; }
bool WholeSequence::active() { return whole_sequence; }

Linear::Linear(int64_t in, int64_t out, bool with_bias, const std::string& module_name)
    : torch::nn::Module(module_name) {
  // LibTorch's own Linear initialises it: the same numbers as torch::nn::Linear.
  torch::nn::Linear init(torch::nn::LinearOptions(in, out).bias(with_bias));
  weight = register_parameter("weight", init->weight.detach());
  if (with_bias) bias = register_parameter("bias", init->bias.detach());
}

void Linear::parallelize(const Style& style, std::shared_ptr<Communicator> group) {
  MPIACCEL_CHECK(group != nullptr && !group_, "tp::Linear::parallelize: called twice, or without a group");
  MPIACCEL_CHECK(style.kind != Style::Kind::VocabRows, "tp::Linear: vocab_rows() is a style for a tp::Embedding");
  if (group->size() > 1) {
    keep_part(weight, style, *group, false);
    keep_part(bias, style, *group, true);
  }
  style_ = style;
  group_ = std::move(group);
}

bool Linear::parallelized() const { return group_ && group_->size() > 1; }

at::Tensor Linear::forward(const at::Tensor& x) {
  if (!parallelized()) return detail::linear(x, weight, bias);
  const bool sequence_parallel = style_.sequence_parallel && !WholeSequence::active();
  if (style_.kind == Style::Kind::Colwise) {
    at::Tensor input = x;
    if (!style_.input_in_region)
      input = sequence_parallel ? gather_from_sequence(x, 1, group_) : copy_to_parallel(x, group_);
    const at::Tensor y = detail::linear(input, flat_blocks(weight, style_), flat_blocks(bias, style_));
    return style_.gather_output ? gather_from_parallel(y, -1, group_) : y;
  }
  const at::Tensor input = style_.input_is_parallel ? x : scatter_to_parallel(x, -1, group_);
  const at::Tensor partial = detail::linear(input, weight, at::Tensor());
  if (!sequence_parallel) {
    const at::Tensor y = reduce_from_parallel(partial, group_);
    return bias.defined() ? y + bias : y;
  }
  // Each rank adds the bias to its own shard: its gradient is part of the whole.
  const at::Tensor y = reduce_scatter_to_sequence(partial, 1, group_);
  return bias.defined() ? y + sum_grad_over(bias, group_) : y;
}

void Linear::load_full(const at::Tensor& w, const at::Tensor& b) {
  Communicator* group = parallelized() ? group_.get() : nullptr;
  copy_part(weight, w, style_, group, false, "weight [out, in]");
  if (bias.defined()) copy_part(bias, b, style_, group, true, "bias [out]");
}

Embedding::Embedding(int64_t count, int64_t dim, const std::string& module_name) : torch::nn::Module(module_name) {
  torch::nn::Embedding init(count, dim);
  weight = register_parameter("weight", init->weight.detach());
}

void Embedding::parallelize(const Style& style, std::shared_ptr<Communicator> group) {
  MPIACCEL_CHECK(group != nullptr && !group_, "tp::Embedding::parallelize: called twice, or without a group");
  MPIACCEL_CHECK(style.kind == Style::Kind::VocabRows, "tp::Embedding splits by vocab_rows() only");
  if (group->size() > 1) keep_part(weight, style, *group, false);
  first_ = group->rank() * weight.size(0);
  style_ = style;
  group_ = std::move(group);
}

bool Embedding::parallelized() const { return group_ && group_->size() > 1; }

at::Tensor Embedding::forward(const at::Tensor& tokens) {
  if (!parallelized()) return at::embedding(weight, tokens);
  const int64_t rows = weight.size(0);
  const at::Tensor outside = (tokens < first_).logical_or(tokens >= first_ + rows);
  const at::Tensor local = (tokens - first_).masked_fill(outside, 0);
  const at::Tensor looked_up = at::embedding(weight, local).masked_fill(outside.unsqueeze(-1), 0);
  return style_.sequence_parallel && !WholeSequence::active() ? reduce_scatter_to_sequence(looked_up, 1, group_)
                                                              : reduce_from_parallel(looked_up, group_);
}

void Embedding::load_full(const at::Tensor& w) {
  copy_part(weight, w, style_, parallelized() ? group_.get() : nullptr, false, "weight [rows, dim]");
}

ColumnParallelLinear::ColumnParallelLinear(int64_t in, int64_t out, std::shared_ptr<Communicator> group,
                                           bool bias, bool gather_output)
    : Linear(in, out, bias, "ColumnParallelLinear") {
  Style style = Style::colwise();
  style.gather_output = gather_output;
  parallelize(style, std::move(group));
}

RowParallelLinear::RowParallelLinear(int64_t in, int64_t out, std::shared_ptr<Communicator> group, bool bias,
                                     bool input_is_parallel)
    : Linear(in, out, bias, "RowParallelLinear") {
  Style style = Style::rowwise();
  style.input_is_parallel = input_is_parallel;
  parallelize(style, std::move(group));
}

VocabParallelEmbedding::VocabParallelEmbedding(int64_t vocab, int64_t dim, std::shared_ptr<Communicator> group)
    : Embedding(vocab, dim, "VocabParallelEmbedding") {
  parallelize(Style::vocab_rows(), std::move(group));
}

std::map<std::string, ParamSplit> split_parameters(const torch::nn::Module& model) {
  std::map<std::string, ParamSplit> splits;
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    const std::string prefix = item.key() + ".";
    if (const auto* linear = dynamic_cast<const Linear*>(item.value().get()); linear && linear->parallelized()) {
      const Style& style = linear->style();
      if (style.kind == Style::Kind::Rowwise) {
        splits[prefix + "weight"] = {ParamSplit::Kind::Columns, 1};
        continue;
      }
      const ParamSplit rows = style.fused_blocks > 1 ? ParamSplit{ParamSplit::Kind::FusedRows, style.fused_blocks}
                                                     : ParamSplit{ParamSplit::Kind::Rows, 1};
      splits[prefix + "weight"] = rows;
      if (linear->bias.defined()) splits[prefix + "bias"] = rows;
    } else if (const auto* embedding = dynamic_cast<const Embedding*>(item.value().get());
               embedding && embedding->parallelized()) {
      splits[prefix + "weight"] = {ParamSplit::Kind::Rows, 1};
    }
  }
  return splits;
}

}  // namespace mpiaccel::tp
