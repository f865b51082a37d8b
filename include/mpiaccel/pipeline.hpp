#pragma once
// Pipeline parallelism (docs/parallelism.md, "Pipeline parallelism").
//
// A model is cut into stages of consecutive layers, one (or, interleaved,
// several) per rank of the mesh's pp dimension. LibTorch has no tracer to cut
// an arbitrary forward, so a model declares its pieces: a first function (the
// embedding), its layers, and a last function (the head and the loss), each
// naming the modules it uses. The bundled GPT and Llama do; a model of your
// own implements PipelineModel (examples/pp_own_model):
//
//   auto model = std::make_shared<MyModel>();      // : torch::nn::Module, mpiaccel::PipelineModel
//   pipeline_parallelize(acc, model, *model);       // keeps this rank's stages
//   mpiaccel::Trainer trainer(acc, model);          // steps through the pipeline
//
// A step's batch is cut into microbatches that flow through the stages by
// non-blocking point-to-point messages (Communicator::send_async), in the
// order a schedule gives each rank: GPipe, 1F1B, interleaved 1F1B or ZB-H1,
// whose backward is split into an input-gradient pass and a weight-gradient
// pass (tp::Linear layers defer their weight gradients to it).

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "mpiaccel/model_split.hpp"
#include "mpiaccel/pipeline_model.hpp"
#include "mpiaccel/pipeline_schedule.hpp"
#include "mpiaccel/precision.hpp"
#include "mpiaccel/state.hpp"
#include "mpiaccel/strategy.hpp"

namespace torch::nn {
class Module;
}

namespace mpiaccel {

class Communicator;
namespace detail {
struct PipelineState;  // src/pipeline/pipeline_state.hpp
}

/// How a Pipeline cuts and runs: the [parallelism] pp_* settings, typed, and
/// what its step runs through. pipeline_parallelize (parallelize.hpp) fills
/// it from the job's config, mesh, precision and strategy.
struct PipelineOptions {
  std::shared_ptr<Communicator> group;  ///< the mesh's pp group, ordered by stage
  PipelineScheduleKind schedule = PipelineScheduleKind::OneFOneB;
  int64_t virtual_stages = 0;           ///< stages per rank; 0 = the schedule's (interleaved 2, else 1)
  int64_t microbatches = 1;             ///< per optimizer step
  std::string layers;                   ///< [parallelism] pp_layers ("" = balanced by parameters)
  /// The data-parallel strategy: a rank's last backward of a step reduces
  /// the step's gradients through it.
  Strategy* strategy = nullptr;
  /// Its [distributed] strategy name, and whether it shards gradients (then
  /// a module two stages hold, a tied embedding, is refused).
  std::string strategy_name = "no";
  bool strategy_shards_gradients = false;
  GradScaler* scaler = nullptr;         ///< scales each microbatch's loss (fp16); nullptr: none
  std::string device = "cpu";           ///< where the stages compute
  at::ScalarType compute_dtype = at::kFloat;  ///< autocast's ([distributed] mixed_precision)
};

/// This rank's stages of a model, and the step that runs them
/// (pipeline_parallelize, include/mpiaccel/parallelize.hpp, makes it). As a
/// ModelSplit it tells the Accelerator which parameters this rank counts in
/// the gradient norm and how its state joins the other stages' in a
/// checkpoint.
class Pipeline : public ModelSplit {
 public:
  /// Cuts `module` (which is `model`) for this rank of options.group: the
  /// modules of other stages' pieces are replaced by empty ones and their
  /// memory freed, so module.named_parameters() is this rank's, under the
  /// whole model's names.
  Pipeline(PipelineOptions options, std::shared_ptr<torch::nn::Module> module, PipelineModel& model);
  ~Pipeline() override;
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  int64_t stage_count() const;
  /// This rank's stages, ascending.
  const std::vector<int64_t>& stages() const;
  int64_t microbatches() const;
  PipelineScheduleKind schedule() const;
  /// "pipeline stage 1 of 2 (layers 2-3, the last piece), schedule 1f1b, 4 microbatches".
  std::string describe() const;

  /// One optimizer step's forward and backward: `input` and `target` (the
  /// step's batch, alike on every rank of the pipeline) are cut into the
  /// microbatches along dim 0. Gradients of the step's mean loss accumulate
  /// in this rank's parameters, reduced over the data-parallel group by the
  /// strategy at the rank's last backward; a tied parameter's gradients are
  /// then summed over its stages. Returns the mean loss, on every rank of the
  /// pipeline. Collective over the pipeline and data-parallel groups.
  double train_step(const at::Tensor& input, const at::Tensor& target);
  /// The mean loss of `input` without gradients (forward only). Collective
  /// over the pipeline group.
  double eval_loss(const at::Tensor& input, const at::Tensor& target);
  /// Whether the gradient norm counts `param` here: a tied parameter only on
  /// its lowest stage.
  bool counts_in_grad_norm(const at::Tensor& param) const override;
  const char* dimension() const override { return "pp"; }
  Communicator& group() const override;
  /// state_of_all_stages.
  ShardedStateDict to_whole(ShardedStateDict local) override { return state_of_all_stages(std::move(local)); }

  /// `local` (this rank's state, as its strategy describes it) with every
  /// other stage's tensors added with no rows of this rank, and a tied
  /// parameter written by its lowest stage only: what a checkpoint of the
  /// whole model needs from each rank (the same list on every rank).
  /// Collective over the pipeline group.
  ShardedStateDict state_of_all_stages(ShardedStateDict local) const;

  /// The last train_step's wall time and the time this rank computed in it
  /// (the rest is the bubble and communication).
  struct Timing {
    double step_s = 0;
    double compute_s = 0;
  };
  Timing last_timing() const;

 private:
  std::unique_ptr<detail::PipelineState> impl_;
};

}  // namespace mpiaccel
