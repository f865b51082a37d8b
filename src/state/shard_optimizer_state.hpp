#pragma once
// An optimizer that steps dim-0 row shards of the parameters instead of the
// parameters (ZeRO stages 1-2; DDP's node-shared parameters): re-pointing it
// at the shards, and its state as ShardedStateDict entries. The names and
// logical shapes are those of the replicated state dict
// (replicated_state.hpp), so checkpoints move between strategies and world
// sizes:
//   optim/<fqn>/<slot>  exactly this rank's rows of the parameter
//                       (shards[i].ranges[rank]); no communication;
//   optim/<fqn>/step    0-d int64, the per-parameter step (rank 0 saves it,
//                       every rank loads it).

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

#include "mpiaccel/state.hpp"
#include "state/shard_layout.hpp"

namespace torch::optim {
class Optimizer;
}

namespace mpiaccel::detail {

/// Trainable parameter i (`params[i]`, named `names[i]`) is split as
/// `shards[i]`; the optimizer holds `shard_params[i]` for it.
struct RowShardedParams {
  std::vector<at::Tensor> params;
  std::vector<std::string> names;
  std::vector<ParamShard> shards;
  std::vector<at::Tensor> shard_params;
  std::vector<char> in_optimizer;  ///< shard_params[i] is in a param group (after repoint)

  /// Replaces each parameter in the optimizer's param groups by its shard
  /// (groups keep their options and order) and fills in_optimizer. Throws if
  /// the optimizer has stepped or holds a trainable tensor that is not one of
  /// `params`. `who` names the strategy in errors ("ZeRO prepare").
  void repoint_optimizer(torch::optim::Optimizer& optimizer, const std::string& who);
};

/// Appends this rank's optimizer slots and step counts to `dict` (saving):
/// the rows of shard `rank` of `world`, or none when `writes` is false (a
/// replica whose rows another rank writes: DDP's node-shared parameters on
/// every node but the first).
void add_shard_optimizer_state(ShardedStateDict& dict, torch::optim::Optimizer& optimizer,
                               const RowShardedParams& sharded, int rank, int world,
                               bool writes = true);

/// Loaded step counts, to write into the optimizer once the checkpoint has
/// filled them: (shard parameter, 0-d step).
using PendingSteps = std::vector<std::pair<at::Tensor, at::Tensor>>;

/// Appends the optimizer's own slot tensors (created fresh if it has not
/// stepped yet) as load destinations of this rank's rows, and one 0-d step
/// per parameter. Returns the steps for apply_pending_steps.
PendingSteps add_shard_optimizer_targets(ShardedStateDict& dict, torch::optim::Optimizer& optimizer,
                                         const RowShardedParams& sharded, int rank);
void apply_pending_steps(torch::optim::Optimizer& optimizer, const PendingSteps& steps);

}  // namespace mpiaccel::detail
