#include "trainer/evaluation.hpp"

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/utils.h>

namespace mpiaccel::detail {

EvalResult evaluate(Accelerator& acc, Model& model, DistributedLoader& loader, int64_t batches) {
  torch::NoGradGuard no_grad;
  auto& module = model.module();
  const bool was_training = module.is_training();
  module.eval();
  loader.restore(LoaderState{});
  const bool classifies = model.kind() != "gpt";
  double loss_sum = 0, correct = 0, seen = 0;
  for (int64_t b = 0; b < batches; ++b) {
    auto batch = loader.next();
    auto output = model.forward(batch.input);
    loss_sum += model.loss(output, batch.target).item<double>();
    if (classifies) {
      correct += output.argmax(1).eq(batch.target).sum().item<double>();
      seen += static_cast<double>(batch.target.size(0));
    }
  }
  if (was_training) module.train();
  auto totals = at::tensor({loss_sum, static_cast<double>(batches), correct, seen}, at::kDouble);
  acc.comm().all_reduce(totals, ReduceOp::Sum);
  EvalResult result;
  result.loss = totals[0].item<double>() / std::max(1.0, totals[1].item<double>());
  if (classifies) result.accuracy = totals[2].item<double>() / std::max(1.0, totals[3].item<double>());
  return result;
}

}  // namespace mpiaccel::detail
