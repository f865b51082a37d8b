// Column- and row-parallel linear layers and the vocabulary-parallel
// embedding (tensor_parallel.hpp).

#include <ATen/ATen.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include <string>
#include <utility>

#include "mpiaccel/comm.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/tensor_parallel.hpp"

namespace mpiaccel::tp {
namespace {

// The whole layer initialised as LibTorch's own (the same numbers on every
// rank from the same generator state), then this rank's slice kept.
std::pair<at::Tensor, at::Tensor> linear_init(int64_t in, int64_t out, bool bias) {
  torch::nn::Linear full(torch::nn::LinearOptions(in, out).bias(bias));
  return {full->weight.detach(), bias ? full->bias.detach() : at::Tensor()};
}

void copy_slice(at::Tensor& target, const at::Tensor& full, int64_t dim, const Communicator& group,
                const char* what) {
  MPIACCEL_CHECK(full.defined() && full.dim() == target.dim(),
                 std::string("tensor parallelism: load_full needs the whole ") + what);
  const at::Tensor slice = dim < 0 ? full : local_slice(full, dim, group);
  MPIACCEL_CHECK(slice.sizes() == target.sizes(),
                 std::string("tensor parallelism: the whole ") + what + " has the wrong shape");
  at::NoGradGuard no_grad;
  target.copy_(slice);
}

}  // namespace

ColumnParallelLinear::ColumnParallelLinear(int64_t in, int64_t out, std::shared_ptr<Communicator> group,
                                           bool bias, bool gather_output)
    : torch::nn::Module("ColumnParallelLinear"), group_(std::move(group)), gather_output_(gather_output) {
  auto [w, b] = linear_init(in, out, bias);
  weight = register_parameter("weight", local_slice(w, 0, *group_).clone());
  if (bias) this->bias = register_parameter("bias", local_slice(b, 0, *group_).clone());
}

at::Tensor ColumnParallelLinear::forward(const at::Tensor& x) {
  at::Tensor y = at::linear(copy_to_parallel(x, group_), weight, bias);
  return gather_output_ ? gather_from_parallel(y, -1, group_) : y;
}

void ColumnParallelLinear::load_full(const at::Tensor& w, const at::Tensor& b) {
  copy_slice(weight, w, 0, *group_, "weight [out, in]");
  if (bias.defined()) copy_slice(bias, b, 0, *group_, "bias [out]");
}

RowParallelLinear::RowParallelLinear(int64_t in, int64_t out, std::shared_ptr<Communicator> group, bool bias,
                                     bool input_is_parallel)
    : torch::nn::Module("RowParallelLinear"), group_(std::move(group)), input_is_parallel_(input_is_parallel) {
  auto [w, b] = linear_init(in, out, bias);
  weight = register_parameter("weight", local_slice(w, 1, *group_).clone());
  if (bias) this->bias = register_parameter("bias", b.clone());
}

at::Tensor RowParallelLinear::forward(const at::Tensor& x) {
  const at::Tensor input = input_is_parallel_ ? x : scatter_to_parallel(x, -1, group_);
  at::Tensor y = reduce_from_parallel(at::linear(input, weight), group_);
  return bias.defined() ? y + bias : y;
}

void RowParallelLinear::load_full(const at::Tensor& w, const at::Tensor& b) {
  copy_slice(weight, w, 1, *group_, "weight [out, in]");
  if (bias.defined()) copy_slice(bias, b, -1, *group_, "bias [out]");
}

VocabParallelEmbedding::VocabParallelEmbedding(int64_t vocab, int64_t dim, std::shared_ptr<Communicator> group)
    : torch::nn::Module("VocabParallelEmbedding"), group_(std::move(group)) {
  torch::nn::Embedding full(vocab, dim);
  weight = register_parameter("weight", local_slice(full->weight.detach(), 0, *group_).clone());
  rows_ = weight.size(0);
  first_ = group_->rank() * rows_;
}

at::Tensor VocabParallelEmbedding::forward(const at::Tensor& tokens) {
  if (group_->size() == 1) return at::embedding(weight, tokens);
  const at::Tensor outside = (tokens < first_).logical_or(tokens >= first_ + rows_);
  const at::Tensor local = (tokens - first_).masked_fill(outside, 0);
  const at::Tensor rows = at::embedding(weight, local).masked_fill(outside.unsqueeze(-1), 0);
  return reduce_from_parallel(rows, group_);
}

void VocabParallelEmbedding::load_full(const at::Tensor& w) { copy_slice(weight, w, 0, *group_, "weight [vocab, dim]"); }

}  // namespace mpiaccel::tp
