// Ulysses attention (context_parallel.hpp): an all-to-all turns this rank's
// sequence shard of every head into the whole sequence of its heads; the
// sequence, gathered in the ranks' zigzag order, is put in position order
// for causal attention, and the output goes back the same way.

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <string>

#include "context_parallel/block_attention.hpp"
#include "context_parallel/ring_attention.hpp"
#include "context_parallel/zigzag_chunks.hpp"
#include "mpiaccel/comm.hpp"
#include "mpiaccel/context_parallel.hpp"
#include "mpiaccel/error.hpp"
#include "tensor_parallel/group_capsule.hpp"

namespace mpiaccel::cp::detail {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using GroupCapsule = tp::detail::GroupCapsule;

// [B, H, L, D] sequence shard of all heads -> [B, H/n, n·L, D] all positions
// (rank blocks in rank order) of this rank's heads.
at::Tensor sequence_to_heads(const at::Tensor& x, Communicator& group) {
  const int64_t n = group.size(), b = x.size(0), h = x.size(1), l = x.size(2), d = x.size(3);
  const at::Tensor blocks = x.reshape({b, n, h / n, l, d}).permute({1, 0, 2, 3, 4}).contiguous();
  at::Tensor received = at::empty_like(blocks);
  group.all_to_all(received.view({-1}), blocks.view({-1}));
  return received.permute({1, 2, 0, 3, 4}).reshape({b, h / n, n * l, d});
}

// The inverse of sequence_to_heads.
at::Tensor heads_to_sequence(const at::Tensor& y, Communicator& group) {
  const int64_t n = group.size(), b = y.size(0), hn = y.size(1), l = y.size(2) / n, d = y.size(3);
  const at::Tensor blocks = y.reshape({b, hn, n, l, d}).permute({2, 0, 1, 3, 4}).contiguous();
  at::Tensor received = at::empty_like(blocks);
  group.all_to_all(received.view({-1}), blocks.view({-1}));
  return received.permute({1, 0, 2, 3, 4}).reshape({b, n * hn, l, d});
}

// The all-to-all as an autograd function: each direction's adjoint is the other.
struct SwapShards : torch::autograd::Function<SwapShards> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, c10::intrusive_ptr<GroupCapsule> capsule,
                            bool to_heads) {
    Communicator& group = *capsule->group;
    ctx->saved_data["group"] = at::IValue::make_capsule(std::move(capsule));
    ctx->saved_data["to_heads"] = to_heads;
    return to_heads ? sequence_to_heads(x, group) : heads_to_sequence(x, group);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    Communicator& group = *GroupCapsule::from(ctx);
    const at::Tensor& g = grads[0];
    const bool to_heads = ctx->saved_data["to_heads"].toBool();
    return {to_heads ? heads_to_sequence(g, group) : sequence_to_heads(g, group), at::Tensor(), at::Tensor()};
  }
};

// The global position of each place of the gathered sequence: every rank's
// zigzag positions, in rank order.
at::Tensor gathered_positions(int64_t time, const Communicator& group, const at::TensorOptions& options) {
  std::vector<at::Tensor> parts;
  for (int64_t r = 0; r < group.size(); ++r) parts.push_back(rank_positions(time, r, group.size(), options));
  return at::cat(parts);
}

}  // namespace

at::Tensor all_to_all_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                const std::shared_ptr<Communicator>& group) {
  const int64_t n = group->size();
  check_heads(Exchange::AllToAll, q.size(1), n);
  const at::Tensor gathered = gathered_positions(q.size(2) * n, *group, q.options());
  const at::Tensor order = gathered.argsort();  // position p sits at place order[p]
  auto to_heads = [&](const at::Tensor& x) {
    return SwapShards::apply(x, GroupCapsule::of(group), true).index_select(2, order);
  };
  // Key/value heads swap unrepeated when the ranks divide them (rank p's
  // query heads use exactly its block of them), else repeated first.
  const int64_t n_rep = q.size(1) / k.size(1);
  const int64_t before = k.size(1) % n == 0 ? 1 : n_rep;
  auto kv_to_heads = [&](const at::Tensor& x) { return repeat_heads(to_heads(repeat_heads(x, before)), n_rep / before); };
  const at::Tensor y = whole_causal_attention(to_heads(q), kv_to_heads(k), kv_to_heads(v));
  return SwapShards::apply(y.index_select(2, gathered), GroupCapsule::of(group), false);
}

}  // namespace mpiaccel::cp::detail
