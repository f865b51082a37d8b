#pragma once
// A split of the model across ranks beyond the data-parallel strategy's:
// tensor parallelism's slices, pipeline stages. What the Accelerator's step
// and checkpoints need of a split, and nothing of how it was made: the
// parallelize step (include/mpiaccel/parallelize.hpp) makes the splits and
// hands them to the Accelerator (Accelerator::add_split) before prepare.

#include <ATen/core/Tensor.h>

#include <memory>

#include "mpiaccel/state.hpp"

namespace mpiaccel {

class Communicator;

class ModelSplit {
 public:
  virtual ~ModelSplit() = default;

  /// The mesh dimension the split runs over ("tp", "pp").
  virtual const char* dimension() const = 0;
  /// Its ranks: the sum of their squared gradient norms is the model's.
  virtual Communicator& group() const = 0;
  /// Whether this rank counts `param` in the gradient norm, so that every
  /// parameter of the model counts once over the group.
  virtual bool counts_in_grad_norm(const at::Tensor& param) const = 0;

  /// Saving: `local` (this rank's state as the strategy describes it, after
  /// any earlier split's) as the tensors of the whole model. Collective over
  /// the group.
  virtual ShardedStateDict to_whole(ShardedStateDict local) = 0;
  /// Loading: `local` (the strategy's targets) as whole-model targets; after
  /// the checkpoint filled them, finish_load() puts each rank's part into
  /// `local`'s tensors. The default: targets as they are.
  virtual ShardedStateDict whole_targets(ShardedStateDict local) { return local; }
  virtual void finish_load() {}
};

}  // namespace mpiaccel
