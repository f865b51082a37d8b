#pragma once
// Internal: DDP's node-shared parameters (docs/ddp.md, "Node-shared
// parameters"; [ddp] node_shared_params).
//
// Plain DDP on a node of L ranks keeps L identical replicas of the
// parameters, one per rank, and updates each of them with the same averaged
// gradient: L copies in memory and L identical optimizer steps. Here the
// parameters live once per node, in a block of node-shared memory that the
// node's ranks map (set_data re-points each parameter at it), and each rank
// updates only its rows of every parameter (torch.chunk split of dim 0 among
// the node's ranks, as ZeRO): the optimizer steps row views of the shared
// parameters, whose gradients are the same rows of the averaged param.grad.
// The optimizer therefore holds the state of this rank's rows only. Across
// nodes every node holds (and updates) its own copy, from the same averaged
// gradients: one copy per host. A barrier after the step keeps every rank from reading the parameters
// in its next forward before all rows are written; none is needed before it,
// because a rank reaches the step only after every rank's backward has
// produced (and so finished reading) every gradient.

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "mpiaccel/state.hpp"
#include "state/shard_optimizer_state.hpp"

namespace torch::optim {
class Optimizer;
}

namespace mpiaccel {
class Communicator;
}

namespace mpiaccel::detail {

class NodeSharedParams {
 public:
  /// Moves `params` (trainable, distinct, identical on every rank: broadcast
  /// them first) into node-shared memory, one block per node, and re-points
  /// `optimizer` at this rank's rows. Returns nullptr on every rank alike,
  /// changing nothing, where that is not possible on some node (parameters
  /// off the CPU, one rank on a node, NCCL, a small /dev/shm). Collective
  /// over world.
  static std::unique_ptr<NodeSharedParams> create(std::vector<at::Tensor> params,
                                                  std::vector<std::string> names,
                                                  std::shared_ptr<Communicator> world,
                                                  torch::optim::Optimizer& optimizer);

  /// Binds each row view's gradient to the same rows of param.grad. After
  /// every synchronised backward, before unscaling, clipping and the step.
  void attach_grads();
  /// The global L2 norm of the gradients, from this rank's rows. Collective.
  /// Of the parameters `counted` accepts. Collective.
  double grad_norm(const std::function<bool(const at::Tensor&)>& counted);
  /// Scales this rank's rows of the gradients (the rows it will apply).
  void scale_grads(double factor);
  /// The optimizer step on this rank's rows (their gradients attached by
  /// attach_grads), then the barrier. Collective.
  void step(torch::optim::Optimizer& optimizer);

  /// Whether `tensor` is one of the row views the optimizer holds.
  bool holds(const at::Tensor& tensor) const;
  /// Parameters every rank shares (model/<fqn> is loaded spread over ranks).
  const std::vector<at::Tensor>& params() const { return sharded_.params; }
  /// Bytes of this rank's rows of the shared parameters.
  int64_t own_param_bytes() const;
  /// Bytes of the shared parameters (the block's contents).
  int64_t shared_param_bytes() const;
  /// This rank's place among its node's ranks, which split the rows.
  int node_rank() const;
  int node_size() const;

  /// Optimizer state entries for saving / load targets (see
  /// state/shard_optimizer_state.hpp); finish_load() writes the loaded step
  /// counts and waits until every rank has filled its rows. Collective.
  void add_optimizer_state(ShardedStateDict& dict, torch::optim::Optimizer& optimizer) const;
  void add_optimizer_targets(ShardedStateDict& dict, torch::optim::Optimizer& optimizer);
  void finish_load(torch::optim::Optimizer& optimizer);

 private:
  NodeSharedParams() = default;

  RowShardedParams sharded_;
  std::shared_ptr<Communicator> comm_;  // this node's ranks
  bool writes_state_ = true;            // this node writes the optimizer state
  std::unordered_set<const void*> shard_impls_;  // for holds()
  at::Tensor block_;  // keeps the shared memory mapped
  PendingSteps pending_steps_;
};

}  // namespace mpiaccel::detail
