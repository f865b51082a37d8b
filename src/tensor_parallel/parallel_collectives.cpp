// The differentiable collectives of tensor parallelism (tensor_parallel.hpp):
// each is an autograd function whose backward is the forward's adjoint.

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <memory>
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

struct GatherFromParallel : torch::autograd::Function<GatherFromParallel> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t dim,
                            c10::intrusive_ptr<GroupCapsule> g) {
    ctx->saved_data["dim"] = dim;
    const at::Tensor out = gathered(x, dim, *g->group);
    ctx->saved_data["group"] = at::IValue::make_capsule(std::move(g));
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const int64_t dim = ctx->saved_data["dim"].toInt();
    return {local_slice(grads.at(0), dim, *GroupCapsule::from(ctx)).contiguous(), at::Tensor(), at::Tensor()};
  }
};

struct ScatterToParallel : torch::autograd::Function<ScatterToParallel> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t dim,
                            c10::intrusive_ptr<GroupCapsule> g) {
    ctx->saved_data["dim"] = dim;
    const at::Tensor out = local_slice(x, dim, *g->group).contiguous();
    ctx->saved_data["group"] = at::IValue::make_capsule(std::move(g));
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const int64_t dim = ctx->saved_data["dim"].toInt();
    return {gathered(grads.at(0), dim, *GroupCapsule::from(ctx)), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor local_slice(const at::Tensor& full, int64_t dim, const Communicator& group) {
  dim = wrapped(dim, full);
  const int64_t n = full.size(dim);
  MPIACCEL_CHECK(n % group.size() == 0, "tensor parallelism: dimension " + std::to_string(dim) + " of size " +
                                            std::to_string(n) + " does not divide by the " +
                                            std::to_string(group.size()) + " tensor-parallel ranks");
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
