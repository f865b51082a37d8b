#include "trainer/evaluation.hpp"

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/utils.h>

#include <algorithm>

namespace mpiaccel {

EvalMetric accuracy_metric(std::string name) {
  return {std::move(name), [](const at::Tensor& output, const Batch& batch) {
            const double correct = output.argmax(1).eq(batch.target).sum().item<double>();
            return std::make_pair(correct, static_cast<double>(batch.target.size(0)));
          }};
}

namespace detail {

EvalResult evaluate(Accelerator& acc, torch::nn::Module& model,
                    const std::function<Trainer::StepOutput(const Batch&)>& step,
                    const std::vector<EvalMetric>& metrics, DistributedLoader& loader,
                    int64_t batches) {
  torch::NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  loader.restore(LoaderState{});
  // [loss sum, batches, then (sum, count) per metric]: one all-reduce.
  std::vector<double> totals(2 + 2 * metrics.size(), 0.0);
  for (int64_t b = 0; b < batches; ++b) {
    const Batch batch = loader.next();
    const Trainer::StepOutput out = step(batch);
    totals[0] += out.loss.item<double>();
    totals[1] += 1;
    for (size_t m = 0; m < metrics.size(); ++m) {
      const auto [sum, count] = metrics[m].measure(out.output, batch);
      totals[2 + 2 * m] += sum;
      totals[3 + 2 * m] += count;
    }
  }
  model.train(was_training);
  auto reduced = at::tensor(totals, at::kDouble);
  acc.comm().all_reduce(reduced, ReduceOp::Sum);
  auto value = [&](size_t i) { return reduced[static_cast<int64_t>(i)].item<double>(); };
  EvalResult result;
  result.loss = value(0) / std::max(1.0, value(1));
  for (size_t m = 0; m < metrics.size(); ++m)
    result.metrics[metrics[m].name] = value(2 + 2 * m) / std::max(1.0, value(3 + 2 * m));
  return result;
}

}  // namespace detail
}  // namespace mpiaccel
