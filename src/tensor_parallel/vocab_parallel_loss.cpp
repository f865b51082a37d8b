// The cross-entropy of vocabulary-parallel logits (tensor_parallel.hpp), as
// Megatron computes it: three all-reduces of [N] vectors (max, sum of
// exponentials, target logit) instead of gathering [N, V] logits. Backward is
// local: softmax minus the one-hot target, on this rank's columns.

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <string>

#include "mpiaccel/comm.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/tensor_parallel.hpp"
#include "tensor_parallel/group_capsule.hpp"

namespace mpiaccel::tp {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using detail::GroupCapsule;

// Per-token losses [N] of logits [N, V/tp] (this rank's vocabulary columns,
// from `first`) against targets [N] (every target valid: ignored ones are
// masked by the caller).
struct VocabParallelLosses : torch::autograd::Function<VocabParallelLosses> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& logits, const at::Tensor& target,
                            int64_t first, c10::intrusive_ptr<GroupCapsule> g) {
    Communicator& group = *g->group;
    const at::Tensor x = logits.to(at::kFloat);
    at::Tensor max = std::get<0>(x.max(-1)).contiguous();
    group.all_reduce(max, ReduceOp::Max);
    const at::Tensor shifted = x - max.unsqueeze(-1);
    const int64_t columns = x.size(-1);
    const at::Tensor outside = (target < first).logical_or(target >= first + columns);
    const at::Tensor column = (target - first).masked_fill(outside, 0);
    at::Tensor picked = shifted.gather(-1, column.unsqueeze(-1)).squeeze(-1).masked_fill(outside, 0).contiguous();
    group.all_reduce(picked, ReduceOp::Sum);
    at::Tensor softmax = shifted.exp();
    at::Tensor sum = softmax.sum(-1).contiguous();
    group.all_reduce(sum, ReduceOp::Sum);
    softmax.div_(sum.unsqueeze(-1));  // in place: the exponentials are not needed again
    ctx->save_for_backward({softmax, column, outside});
    ctx->saved_data["dtype"] = static_cast<int64_t>(logits.scalar_type());
    return sum.log() - picked;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    at::Tensor grad = saved[0].clone();  // softmax on this rank's columns
    const at::Tensor inside = saved[2].logical_not().to(grad.scalar_type());
    grad.scatter_add_(-1, saved[1].unsqueeze(-1), -inside.unsqueeze(-1));
    grad.mul_(grads.at(0).unsqueeze(-1));
    const auto dtype = static_cast<at::ScalarType>(ctx->saved_data["dtype"].toInt());
    return {grad.to(dtype), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor vocab_parallel_cross_entropy(const at::Tensor& local_logits, const at::Tensor& target,
                                        const std::shared_ptr<Communicator>& group, int64_t ignore_index) {
  MPIACCEL_CHECK(local_logits.dim() == 2 && target.dim() == 1 && target.size(0) == local_logits.size(0),
                 "vocab_parallel_cross_entropy: logits [N, V/tp] and targets [N], not " +
                     std::to_string(local_logits.dim()) + "-D and " + std::to_string(target.dim()) + "-D");
  const at::Tensor kept = target != ignore_index;
  const at::Tensor safe = target.masked_fill(kept.logical_not(), 0);
  const int64_t first = group->rank() * local_logits.size(-1);
  const at::Tensor losses = VocabParallelLosses::apply(local_logits, safe, first, GroupCapsule::of(group));
  const at::Tensor weights = kept.to(losses.scalar_type());
  return (losses * weights).sum() / weights.sum().clamp_min(1);
}

}  // namespace mpiaccel::tp
