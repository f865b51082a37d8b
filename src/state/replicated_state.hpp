#pragma once
// ShardedStateDict for a model and optimizer that every rank holds in full
// (NoDist, DDP). On save, each tensor's dim-0 rows are spread over the ranks
// with even_row_range so every rank writes a part (or rank 0 writes all, for
// ranks that are not replicas of each other). On load, every rank needs every
// row, so the targets are the tensors themselves, whole.
//
// Names: "model/<fqn>" for parameters and buffers, "optim/<fqn>/<slot>" for
// optimizer slots, and "optim/<fqn>/step" (0-d int64) for Adam/AdamW's
// per-parameter step count.

#include <ATen/core/Tensor.h>

#include <utility>
#include <vector>

#include "mpiaccel/state.hpp"

namespace torch::nn {
class Module;
}
namespace torch::optim {
class Optimizer;
}

namespace mpiaccel {

/// How the save rows of a replicated tensor are spread.
enum class RowOwnership {
  Spread,     ///< even_row_range over the ranks: every rank writes a part
  RankZero,   ///< rank 0 writes every row, others none (independent ranks)
};

/// This rank's rows of every model tensor ("model/<fqn>"), for saving.
void add_model_rows(ShardedStateDict& dict, const torch::nn::Module& model, int rank, int size,
                    RowOwnership ownership = RowOwnership::Spread);
/// Load destinations of every model tensor: whole on every rank, except the
/// parameters in `spread` (which every rank shares in memory): of those, each
/// rank loads its even_row_range rows.
void add_model_targets(ShardedStateDict& dict, torch::nn::Module& model, int rank, int size,
                       const std::vector<at::Tensor>& spread = {});

/// This rank's rows of every model tensor and optimizer slot, plus optimizer
/// attributes. No communication. Slots the optimizer has not created yet
/// (before its first step) are not listed.
ShardedStateDict replicated_state_dict(const torch::nn::Module& model,
                                       torch::optim::Optimizer& optimizer, int rank, int size,
                                       RowOwnership ownership = RowOwnership::Spread);

/// Load destinations: every row of every tensor. Missing optimizer slots are
/// created (see optimizer_slots' create_missing). Step counts are loaded into
/// separate 0-d tensors; finish() writes them into the optimizer.
struct ReplicatedLoad {
  ShardedStateDict targets;
  std::vector<std::pair<at::Tensor, at::Tensor>> steps;  ///< (parameter, loaded step)
  void finish(torch::optim::Optimizer& optimizer) const;
};
ReplicatedLoad replicated_load_targets(torch::nn::Module& model,
                                       torch::optim::Optimizer& optimizer);

}  // namespace mpiaccel
