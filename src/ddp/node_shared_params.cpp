// DDP's node-shared parameters (see node_shared_params.hpp).

#include "ddp/node_shared_params.hpp"

#include <ATen/core/grad_mode.h>
#include <ATen/ATen.h>
#include <torch/optim/optimizer.h>

#include <cmath>

#include "grad_sync/grad_math.hpp"
#include "mpiaccel/comm.hpp"
#include "mpiaccel/error.hpp"
#include "state/shard_layout.hpp"

namespace mpiaccel::detail {
namespace {

// Every parameter starts on a cache line of its own in the block.
constexpr int64_t kParamAlignBytes = 64;

int64_t bytes_of(const at::Tensor& t) { return t.numel() * t.element_size(); }

}  // namespace

std::unique_ptr<NodeSharedParams> NodeSharedParams::create(std::vector<at::Tensor> params,
                                                           std::vector<std::string> names,
                                                           std::shared_ptr<Communicator> world,
                                                           torch::optim::Optimizer& optimizer) {
  MPIACCEL_CHECK(world && params.size() == names.size(), "node-shared parameters: bad arguments");
  // The models agree across ranks (checked before), so every rank decides alike.
  if (params.empty()) return nullptr;
  std::vector<int64_t> offsets;
  int64_t total = 0;
  for (const at::Tensor& p : params) {
    if (!p.device().is_cpu() || !p.is_contiguous()) return nullptr;
    total = (total + kParamAlignBytes - 1) / kParamAlignBytes * kParamAlignBytes;
    offsets.push_back(total);
    total += bytes_of(p);
  }
  // One block per node, among that node's ranks; every node must have one
  // (a node of one rank, or with a small /dev/shm, has none), or no rank
  // uses them.
  std::shared_ptr<Communicator> comm = world->split_by_node();
  at::Tensor block = comm->allocate_node_shared(total);
  if (world->all_reduce_int(block.defined() ? 1 : 0, ReduceOp::Min) == 0) return nullptr;

  std::unique_ptr<NodeSharedParams> shared(new NodeSharedParams());
  shared->comm_ = comm;
  shared->block_ = block;
  // The node of world rank 0 writes the optimizer state to checkpoints; the
  // other nodes hold the same values.
  shared->writes_state_ = comm->all_reduce_int(world->rank() == 0 ? 1 : 0, ReduceOp::Max) == 1;
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> views;
  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor& p = params[i];
    views.push_back(
        block.narrow(0, offsets[i], bytes_of(p)).view(p.scalar_type()).view(p.sizes()));
  }
  // Rank 0's values (every rank holds the same) fill the block once; nobody
  // reads it before they are all there.
  if (comm->rank() == 0)
    for (size_t i = 0; i < params.size(); ++i) views[i].copy_(params[i]);
  comm->barrier();
  for (size_t i = 0; i < params.size(); ++i) params[i].set_data(views[i]);

  RowShardedParams& sharded = shared->sharded_;
  // The node's ranks split the rows.
  for (const at::Tensor& p : params) {
    sharded.shards.push_back(make_param_shard(p, comm->size()));
    sharded.shard_params.push_back(shard_view(p, sharded.shards.back(), comm->rank()));
    shared->shard_impls_.insert(sharded.shard_params.back().unsafeGetTensorImpl());
  }
  sharded.params = std::move(params);
  sharded.names = std::move(names);
  sharded.repoint_optimizer(optimizer, "DDP prepare (node-shared parameters)");
  return shared;
}

void NodeSharedParams::attach_grads() {
  const int rank = comm_->rank();
  for (size_t i = 0; i < sharded_.params.size(); ++i) {
    const at::Tensor& grad = sharded_.params[i].grad();
    at::Tensor& bound = sharded_.shard_params[i].mutable_grad();
    if (!grad.defined()) {
      bound = at::Tensor();
      continue;
    }
    // param.grad is a bucket view that stays put from step to step: keep the
    // row view already bound to it (no allocation per step), make a new one
    // only when the gradient moved (bucket rebuild, first backward).
    const ParamShard& shard = sharded_.shards[i];
    const char* rows = static_cast<const char*>(grad.data_ptr()) +
                       shard.ranges[rank].begin * shard.row_numel * grad.element_size();
    if (bound.defined() && bound.data_ptr() == rows && bound.numel() == shard.numel(rank)) continue;
    bound = shard_view(grad, shard, rank);
  }
}

double NodeSharedParams::grad_norm(const std::function<bool(const at::Tensor&)>& counted) {
  // Each rank's rows once per node (every node holds the same averaged
  // gradients): the root of the node's summed squares.
  std::vector<at::Tensor> rows;
  for (size_t i = 0; i < sharded_.params.size(); ++i)
    if (counted(sharded_.params[i])) rows.push_back(sharded_.shard_params[i]);
  const double local = local_grad_norm(rows);
  return std::sqrt(comm_->all_reduce_scalar(local * local, ReduceOp::Sum));
}

void NodeSharedParams::scale_grads(double factor) { scale_local_grads(sharded_.shard_params, factor); }

void NodeSharedParams::step(torch::optim::Optimizer& optimizer) {
  at::NoGradGuard no_grad;
  optimizer.step();  // on the row views, their gradients attached after backward
  // Every row is written before any rank's next forward reads the parameters.
  comm_->barrier();
}

bool NodeSharedParams::holds(const at::Tensor& tensor) const {
  return shard_impls_.count(tensor.unsafeGetTensorImpl()) != 0;
}

int64_t NodeSharedParams::own_param_bytes() const {
  int64_t bytes = 0;
  for (const at::Tensor& shard : sharded_.shard_params) bytes += bytes_of(shard);
  return bytes;
}

int64_t NodeSharedParams::shared_param_bytes() const {
  int64_t bytes = 0;
  for (const at::Tensor& p : sharded_.params) bytes += bytes_of(p);
  return bytes;
}

int NodeSharedParams::node_rank() const { return comm_->rank(); }
int NodeSharedParams::node_size() const { return comm_->size(); }

void NodeSharedParams::add_optimizer_state(ShardedStateDict& dict,
                                           torch::optim::Optimizer& optimizer) const {
  add_shard_optimizer_state(dict, optimizer, sharded_, comm_->rank(), comm_->size(), writes_state_);
}

void NodeSharedParams::add_optimizer_targets(ShardedStateDict& dict,
                                             torch::optim::Optimizer& optimizer) {
  pending_steps_ = add_shard_optimizer_targets(dict, optimizer, sharded_, comm_->rank());
}

void NodeSharedParams::finish_load(torch::optim::Optimizer& optimizer) {
  apply_pending_steps(optimizer, pending_steps_);
  pending_steps_.clear();
  // Each rank loaded its rows of the shared parameters.
  comm_->barrier();
}

}  // namespace mpiaccel::detail
