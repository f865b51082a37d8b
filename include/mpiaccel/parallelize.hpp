#pragma once
// One step that lays a model over the job's mesh ([parallelism]), in the one
// order the splits compose (docs/parallelism.md): tensor (tp_size), then
// context (cp_size), then pipeline (pp_size), then the data-parallel
// strategy over what this rank keeps, as torchtitan's parallelize_llama
// does. The built-in trainer calls it once; so does a program of the
// user's own, through the Trainer (Trainer::parallel_plan) or directly:
//
//   mpiaccel::ParallelPlan plan;
//   plan.tensor = [&](std::shared_ptr<mpiaccel::Communicator> tp) {
//     tp::parallelize_module(*net, tp, {{"blocks.*.up", tp::Style::colwise()}, ...});
//   };
//   plan.pipeline = net.get();  // a PipelineModel, for pp_size > 1
//   auto optimizer = mpiaccel::parallelize(acc, net, plan, [](torch::nn::Module& kept) {
//     return std::make_shared<torch::optim::AdamW>(kept.parameters(), 1e-3);
//   });

#include <functional>
#include <memory>

#include "mpiaccel/config.hpp"

namespace torch::nn {
class Module;
}
namespace torch::optim {
class Optimizer;
}

namespace mpiaccel {

class Accelerator;
class Communicator;
class Model;
class Pipeline;
class PipelineModel;

/// What a model can do under each split; parallelize() applies the steps the
/// mesh asks for. A step the mesh does not ask for is not called.
struct ParallelPlan {
  /// tp_size > 1: splits the model in place over the mesh's tp group
  /// (tensor_parallelize, tp::parallelize_module).
  std::function<void(std::shared_ptr<Communicator> tp)> tensor;
  /// cp_size > 1: splits each sequence over the mesh's cp group
  /// (context_parallelize, cp::causal_attention).
  std::function<void(std::shared_ptr<Communicator> cp)> context;
  /// pp_size > 1: the model's pipeline pieces (the module parallelize()
  /// takes must be this PipelineModel); this rank keeps its stages.
  PipelineModel* pipeline = nullptr;
};

/// The optimizer over the parameters this rank keeps (after the splits).
using OptimizerFactory = std::function<std::shared_ptr<torch::optim::Optimizer>(torch::nn::Module& kept)>;

/// A bundled model's plan: its family's tensor split ([parallelism]
/// sequence_parallel), context split (cp_comm_strategy) and pipeline pieces,
/// each present when the family has it (include/mpiaccel/model_family.hpp).
ParallelPlan bundled_plan(Model& model, const Config& config);

/// Applies `plan` to `module` for `acc`'s mesh: tensor, context and pipeline
/// splitting, each where its size is above 1, in that order; then
/// `make_optimizer` over the parameters this rank keeps, and both under the
/// data-parallel strategy (Accelerator::prepare). Returns the optimizer.
/// Throws Error, naming the [parallelism] key, when the mesh asks for a split
/// the plan lacks. Once per run, instead of calling the splits and prepare
/// one by one. Collective.
std::shared_ptr<torch::optim::Optimizer> parallelize(Accelerator& acc, std::shared_ptr<torch::nn::Module> module,
                                                     const ParallelPlan& plan, const OptimizerFactory& make_optimizer);

/// parallelize's pipeline step alone: cuts `module` (which is `model`) into
/// the pipeline stages of [parallelism] pp_size, keeps this rank's
/// (include/mpiaccel/pipeline.hpp) and adds the pipeline to `acc`'s splits.
/// Once, before prepare() (and before building the optimizer over the
/// module's parameters).
Pipeline& pipeline_parallelize(Accelerator& acc, std::shared_ptr<torch::nn::Module> module, PipelineModel& model);
/// The pipeline `acc` steps through, or nullptr when the model was not cut.
Pipeline* pipeline_of(const Accelerator& acc);

}  // namespace mpiaccel
