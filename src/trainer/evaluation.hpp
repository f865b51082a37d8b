#pragma once
// Validation: the mean loss and the user's metrics over a fixed set of
// validation batches, reduced over the ranks.

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "mpiaccel/accelerator.hpp"
#include "mpiaccel/data.hpp"
#include "mpiaccel/trainer.hpp"

namespace mpiaccel::detail {

struct EvalResult {
  double loss = 0;
  std::map<std::string, double> metrics;
};

/// Evaluates `step` (a batch → loss and output) on `batches` batches of
/// `loader` (restarted at its first batch each time, so every evaluation
/// sees the same data), with the model in eval mode and no gradients.
/// Collective: one all-reduce of the loss and every metric's sums.
EvalResult evaluate(Accelerator& acc, torch::nn::Module& model,
                    const std::function<Trainer::StepOutput(const Batch&)>& step,
                    const std::vector<EvalMetric>& metrics, DistributedLoader& loader,
                    int64_t batches);

}  // namespace mpiaccel::detail
