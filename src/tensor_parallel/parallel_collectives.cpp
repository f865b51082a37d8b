// The differentiable collectives of tensor parallelism (tensor_parallel.hpp):
// each is an autograd function whose backward is the forward's adjoint.

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <memory>
#include <string>
#include <vector>

#include "mpiaccel/comm.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/tensor_parallel.hpp"
#include "tensor_parallel/group_capsule.hpp"

namespace mpiaccel::tp {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using detail::GroupCapsule;

at::Tensor all_reduced(const at::Tensor& x, Communicator& group) {
  at::Tensor out = x.clone(at::MemoryFormat::Contiguous);  // one copy, contiguous
  group.all_reduce(out, ReduceOp::Sum);
  return out;
}

at::Tensor gathered(const at::Tensor& x, int64_t dim, Communicator& group) {
  const at::Tensor local = x.contiguous();
  at::Tensor blocks = at::empty({group.size(), local.numel()}, local.options());
  group.all_gather(blocks.view({-1}), local.view({-1}));
  std::vector<at::Tensor> parts;
  for (int r = 0; r < group.size(); ++r) parts.push_back(blocks[r].view(local.sizes()));
  return at::cat(parts, dim);
}

int64_t wrapped(int64_t dim, const at::Tensor& x) { return dim < 0 ? dim + x.dim() : dim; }

void check_divides(int64_t n, int64_t dim, const Communicator& group) {
  MPIACCEL_CHECK(n % group.size() == 0, "tensor parallelism: dimension " + std::to_string(dim) + " of size " +
                                            std::to_string(n) + " does not divide by the " +
                                            std::to_string(group.size()) + " tensor-parallel ranks");
}

// The sum over the group of `x`, this rank's block of `dim`.
at::Tensor reduce_scattered(const at::Tensor& x, int64_t dim, Communicator& group) {
  check_divides(x.size(dim), dim, group);
  const std::vector<at::Tensor> parts = x.chunk(group.size(), dim);
  const at::Tensor blocks = at::stack(parts).contiguous();  // [size, part...]
  at::Tensor out = at::empty(parts[0].sizes(), x.options());
  group.reduce_scatter(out.view({-1}), blocks.view({-1}), ReduceOp::Sum);
  return out;
}

struct CopyToParallel : torch::autograd::Function<CopyToParallel> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, c10::intrusive_ptr<GroupCapsule> g) {
    ctx->saved_data["group"] = at::IValue::make_capsule(std::move(g));
    return x;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {all_reduced(grads.at(0), *GroupCapsule::from(ctx)), at::Tensor()};
  }
};

struct ReduceFromParallel : torch::autograd::Function<ReduceFromParallel> {
  static at::Tensor forward(AutogradContext*, const at::Tensor& x, c10::intrusive_ptr<GroupCapsule> g) {
    return all_reduced(x, *g->group);
  }
  static variable_list backward(AutogradContext*, variable_list grads) { return {grads.at(0), at::Tensor()}; }
};

// This rank's slice along `dim`, contiguous (a collective's shape).
at::Tensor sliced(const at::Tensor& x, int64_t dim, Communicator& group) {
  return local_slice(x, dim, group).contiguous();
}

using DimOp = at::Tensor (*)(const at::Tensor&, int64_t, Communicator&);

// A collective along a dimension whose backward is another: gather/slice
// (tensor parallelism's), gather/reduce-scatter (sequence parallelism's).
template <DimOp Forward, DimOp Backward>
struct AlongDim : torch::autograd::Function<AlongDim<Forward, Backward>> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t dim,
                            c10::intrusive_ptr<GroupCapsule> g) {
    ctx->saved_data["dim"] = dim;
    const at::Tensor out = Forward(x, dim, *g->group);
    ctx->saved_data["group"] = at::IValue::make_capsule(std::move(g));
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const int64_t dim = ctx->saved_data["dim"].toInt();
    return {Backward(grads.at(0), dim, *GroupCapsule::from(ctx)), at::Tensor(), at::Tensor()};
  }
};

using GatherFromParallel = AlongDim<gathered, sliced>;
using ScatterToParallel = AlongDim<sliced, gathered>;
using GatherFromSequence = AlongDim<gathered, reduce_scattered>;
using ReduceScatterToSequence = AlongDim<reduce_scattered, gathered>;

}  // namespace

at::Tensor local_rows_of_blocks(const at::Tensor& full, int64_t blocks, const Communicator& group) {
  if (blocks == 1) return local_slice(full, 0, group);
  MPIACCEL_CHECK(blocks >= 1 && full.size(0) % blocks == 0,
                 "tensor parallelism: " + std::to_string(full.size(0)) + " rows are not " + std::to_string(blocks) +
                     " equal fused blocks");
  std::vector<at::Tensor> parts;
  for (const at::Tensor& block : full.chunk(blocks, 0)) parts.push_back(local_slice(block, 0, group));
  return at::cat(parts, 0);
}

at::Tensor gather_from_sequence(const at::Tensor& x, int64_t dim, const std::shared_ptr<Communicator>& group) {
  if (group->size() == 1) return x;
  return GatherFromSequence::apply(x, wrapped(dim, x), GroupCapsule::of(group));
}

at::Tensor reduce_scatter_to_sequence(const at::Tensor& x, int64_t dim,
                                      const std::shared_ptr<Communicator>& group) {
  if (group->size() == 1) return x;
  return ReduceScatterToSequence::apply(x, wrapped(dim, x), GroupCapsule::of(group));
}

at::Tensor local_slice(const at::Tensor& full, int64_t dim, const Communicator& group) {
  dim = wrapped(dim, full);
  const int64_t n = full.size(dim);
  check_divides(n, dim, group);
  const int64_t part = n / group.size();
  return full.narrow(dim, group.rank() * part, part);
}

at::Tensor copy_to_parallel(const at::Tensor& x, const std::shared_ptr<Communicator>& group) {
  if (group->size() == 1) return x;
  return CopyToParallel::apply(x, GroupCapsule::of(group));
}

at::Tensor reduce_from_parallel(const at::Tensor& x, const std::shared_ptr<Communicator>& group) {
  if (group->size() == 1) return x;
  return ReduceFromParallel::apply(x, GroupCapsule::of(group));
}

at::Tensor gather_from_parallel(const at::Tensor& x, int64_t dim, const std::shared_ptr<Communicator>& group) {
  if (group->size() == 1) return x;
  return GatherFromParallel::apply(x, wrapped(dim, x), GroupCapsule::of(group));
}

at::Tensor scatter_to_parallel(const at::Tensor& x, int64_t dim, const std::shared_ptr<Communicator>& group) {
  if (group->size() == 1) return x;
  return ScatterToParallel::apply(x, wrapped(dim, x), GroupCapsule::of(group));
}

}  // namespace mpiaccel::tp
