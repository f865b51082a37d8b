// ZeRO's ShardedStateDict: the same names and logical shapes as DDP's
// (src/state/replicated_state.hpp) and FSDP's, so checkpoints move between
// strategies and world sizes:
//   model/<fqn>         parameters and buffers: every rank holds them whole;
//                       saved spread over the ranks (even_row_range, as DDP),
//                       loaded whole on every rank;
//   optim/<fqn>/<slot>  the optimizer state of this rank's rows
//   optim/<fqn>/step    (state/shard_optimizer_state.hpp).

#include <ATen/core/grad_mode.h>
#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include "mpiaccel/comm.hpp"
#include "state/optimizer_state.hpp"
#include "state/replicated_state.hpp"
#include "zero/zero_strategy.hpp"

namespace mpiaccel::detail {

ShardedStateDict ZeroStrategy::state_dict(torch::optim::Optimizer& optimizer) {
  require_prepared("state_dict()");
  ShardedStateDict dict;
  add_model_rows(dict, *model_, comm_->rank(), comm_->size());
  add_shard_optimizer_state(dict, optimizer, sharded_, comm_->rank(), comm_->size());
  dict.attributes = optimizer_attributes(optimizer);
  return dict;
}

ShardedStateDict ZeroStrategy::load_targets(torch::optim::Optimizer& optimizer) {
  require_prepared("load_targets()");
  ShardedStateDict dict;
  add_model_targets(dict, *model_, comm_->rank(), comm_->size());
  pending_steps_ = add_shard_optimizer_targets(dict, optimizer, sharded_, comm_->rank());
  dict.attributes = optimizer_attributes(optimizer);
  return dict;
}

void ZeroStrategy::finish_load(torch::optim::Optimizer& optimizer) {
  require_prepared("finish_load()");
  apply_pending_steps(optimizer, pending_steps_);
  pending_steps_.clear();
  if (!offload_) return;  // the shard parameters are views of the loaded parameters
  // Offload: the host masters start again from the loaded parameters' rows.
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < sharded_.params.size(); ++i)
    sharded_.shard_params[i].copy_(shard_view(sharded_.params[i], sharded_.shards[i], comm_->rank()));
}

}  // namespace mpiaccel::detail
