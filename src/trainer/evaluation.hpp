#pragma once
// Validation: mean loss (and accuracy for classification) over a fixed set of
// validation batches, averaged over the ranks.

#include <memory>

#include "mpiaccel/accelerator.hpp"
#include "mpiaccel/data.hpp"
#include "mpiaccel/models.hpp"

namespace mpiaccel::detail {

struct EvalResult {
  double loss = 0;
  double accuracy = -1;  ///< -1 unless the model classifies
};

/// Evaluates `model` on `batches` batches of `loader` (restarted at its first
/// batch each time, so every evaluation sees the same data). Collective.
EvalResult evaluate(Accelerator& acc, Model& model, DistributedLoader& loader, int64_t batches);

}  // namespace mpiaccel::detail
