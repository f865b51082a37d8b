#pragma once
// The trainer (the Transformers Trainer counterpart): give it your model, its
// forward and loss, an optimizer and your datasets, and it runs the loop the
// config describes through an Accelerator — LR schedule, gradient clipping
// and accumulation, evaluation with your metrics, the progress bar and JSONL
// metrics, checkpoints every N steps and resume from `latest` at any world
// size and strategy, pre-emption (SIGUSR1/SIGTERM: checkpoint, exit status
// 3), the hang watchdog and the Chrome trace.
//
//   int main(int argc, char** argv) {
//     return mpiaccel::run_main(argc, argv, [](mpiaccel::Accelerator& acc) {
//       auto net = std::make_shared<Net>();          // any torch::nn::Module with forward(x)
//       mpiaccel::Trainer trainer(acc, net);
//       trainer.loss([](const at::Tensor& out, const at::Tensor& y) { return at::cross_entropy_loss(out, y); })
//           .train_data(std::make_shared<MyData>("train"))
//           .eval_data(std::make_shared<MyData>("val"))
//           .metric(mpiaccel::accuracy_metric());
//       return trainer.train().exit_status;
//     });
//   }
//
// The [train], [optimizer], [scheduler], [checkpoint] and [logging] sections
// configure it (docs/config.md, docs/api.md); `mpiaccel train` is this class
// driving the bundled models and datasets.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "mpiaccel/data.hpp"
#include "mpiaccel/parallelize.hpp"

namespace torch::nn {
class Module;
}
namespace torch::optim {
class Optimizer;
}

namespace mpiaccel {

class Accelerator;

/// Exit statuses of `mpiaccel train` and of programs under run_main (docs/trainer.md).
constexpr int kExitFinished = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;
/// SIGUSR1 or SIGTERM reached a rank: every rank took part in a checkpoint at
/// the next step boundary and stopped. Requeue the job with
/// `checkpoint.resume=latest` (jobs/slurm/*.sbatch do).
constexpr int kExitPreempted = 3;

/// What a run did, for the caller and tests.
struct TrainResult {
  int64_t steps = 0;                 ///< optimizer steps done, counting those before a resume
  std::vector<double> losses;        ///< per step of this run, mean over ranks and micro-batches
  double final_val_loss = 0;
  std::map<std::string, double> final_metrics;  ///< the last evaluation's metrics by name
  double final_val_acc = -1;         ///< final_metrics["val_acc"], or -1 without that metric
  int exit_status = kExitFinished;
};

/// An evaluation metric: `measure` returns (sum, count) for one batch; the
/// metric is Σ sum / Σ count over the evaluation's batches and every rank.
/// Logged under `name` in the metrics file and on the terminal.
struct EvalMetric {
  std::string name;
  std::function<std::pair<double, double>(const at::Tensor& output, const Batch& batch)> measure;
};

/// The share of rows whose largest output (argmax over dim 1) is the target label.
EvalMetric accuracy_metric(std::string name = "val_acc");

class Trainer {
 public:
  using Forward = std::function<at::Tensor(const at::Tensor& input)>;
  using Loss = std::function<at::Tensor(const at::Tensor& output, const at::Tensor& target)>;
  /// For models whose batch is not (input, target): the loss of a whole batch
  /// and the output the metrics measure (may be undefined without metrics).
  struct StepOutput {
    at::Tensor loss;
    at::Tensor output;
  };
  using StepLoss = std::function<StepOutput(const Batch& batch)>;
  /// The optimizer over the parameters this rank keeps (include/mpiaccel/parallelize.hpp).
  using OptimizerFactory = mpiaccel::OptimizerFactory;
  /// Called by every rank after the last step (not after a pre-emption):
  /// may be collective, e.g. generating from a sharded model.
  using EndHook = std::function<void(Accelerator& acc)>;
  /// Like EndHook, and returns a text (the end-of-run sample) that rank 0
  /// prints and reports to TensorBoard ([logging] report_to).
  using TextHook = std::function<std::string(Accelerator& acc)>;

  /// `model` and how to run it: `forward(input)` gives the output that
  /// loss() takes. Build the model on every rank the same way; prepare()
  /// (called by train() unless the accelerator already holds this model)
  /// broadcasts rank 0's values.
  Trainer(Accelerator& accelerator, std::shared_ptr<torch::nn::Module> model, Forward forward);
  /// A model with an `at::Tensor forward(const at::Tensor&)` member.
  template <class M>
  Trainer(Accelerator& accelerator, std::shared_ptr<M> model)
      : Trainer(accelerator, model, [m = model.get()](const at::Tensor& x) { return m->forward(x); }) {}
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  Trainer& loss(Loss loss);
  /// Replaces forward + loss.
  Trainer& step_loss(StepLoss step);
  /// The optimizer, over the model's parameters. Without one (and without a
  /// factory) the trainer makes [optimizer]'s AdamW or SGD, with weight
  /// decay on matrices and embeddings only.
  Trainer& optimizer(std::shared_ptr<torch::optim::Optimizer> optimizer);
  Trainer& optimizer_factory(OptimizerFactory factory);
  /// How the model splits over the mesh (include/mpiaccel/parallelize.hpp):
  /// train() lays it out with parallelize() before its first step, unless
  /// the accelerator already holds this model. Without a plan the model is
  /// not split (a mesh with tp_size, cp_size or pp_size above 1 is refused).
  Trainer& parallel_plan(ParallelPlan plan);
  Trainer& train_data(std::shared_ptr<const Dataset> data);
  /// Evaluated every [train] eval_every steps and at the end, on at most
  /// [train] eval_batches batches (the same ones each time).
  Trainer& eval_data(std::shared_ptr<const Dataset> data);
  Trainer& metric(EvalMetric metric);
  /// Throughput unit for the progress line and the metrics file: e.g.
  /// ("tok", seq_len) logs tokens_per_s; the default ("samples", 1) samples_per_s.
  Trainer& throughput_unit(std::string unit, int64_t per_sample);
  Trainer& at_end(EndHook hook);
  /// After at_end's hook: rank 0 prints "`tag`:" and the text, and reports it under `tag`.
  Trainer& text_at_end(std::string tag, TextHook hook);

  /// Runs [train] max_steps optimizer steps (from the checkpoint of
  /// [checkpoint] resume, if any). Collective over the accelerator's world.
  TrainResult train();

 private:
  struct Loop;
  Accelerator& acc_;
  std::shared_ptr<torch::nn::Module> model_;
  Forward forward_;
  Loss loss_;
  StepLoss step_loss_;
  std::shared_ptr<torch::optim::Optimizer> optimizer_;
  OptimizerFactory optimizer_factory_;
  ParallelPlan plan_;
  std::shared_ptr<const Dataset> train_data_;
  std::shared_ptr<const Dataset> eval_data_;
  std::vector<EvalMetric> metrics_;
  std::string unit_ = "samples";
  int64_t units_per_sample_ = 1;
  EndHook at_end_;
  std::string text_tag_;
  TextHook text_at_end_;
};

/// The built-in trainer behind `mpiaccel train`: the bundled model of
/// [train] model on the bundled dataset of [train] dataset, through Trainer.
/// Collective over the accelerator's world.
TrainResult train(Accelerator& accelerator);

}  // namespace mpiaccel
