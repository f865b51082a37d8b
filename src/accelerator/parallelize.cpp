// parallelize() and the bundled models' plan (include/mpiaccel/parallelize.hpp):
// the one place the splits are applied, in their order.

#include "mpiaccel/parallelize.hpp"

#include <string>
#include <utility>

#include "mpiaccel/accelerator.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/model_family.hpp"
#include "mpiaccel/models.hpp"
#include "mpiaccel/pipeline.hpp"
#include "mpiaccel/pipeline_model.hpp"

namespace mpiaccel {
namespace {

// Throws unless the plan has the step that [parallelism] `key` = `size` asks for.
void require_step(bool present, const char* key, int64_t size, const std::string& step) {
  MPIACCEL_CHECK(present || size <= 1, "[parallelism] " + std::string(key) + " " + std::to_string(size) +
                                           ": the model's plan has no " + step + "; set " + key + " = 1");
}

}  // namespace

ParallelPlan bundled_plan(Model& model, const Config& config) {
  ParallelPlan plan;
  if (model_family(model.kind()).tensor_split != nullptr) {
    const bool sequence_parallel = config.parallelism.sequence_parallel;
    plan.tensor = [&model, sequence_parallel](std::shared_ptr<Communicator> tp) {
      tensor_parallelize(model, std::move(tp), sequence_parallel);
    };
    const CpCommStrategy exchange = config.parallelism.cp_comm_strategy;
    plan.context = [&model, exchange](std::shared_ptr<Communicator> cp) {
      context_parallelize(model, std::move(cp), exchange);
    };
  }
  plan.pipeline = dynamic_cast<PipelineModel*>(&model);
  return plan;
}

std::shared_ptr<torch::optim::Optimizer> parallelize(Accelerator& acc, std::shared_ptr<torch::nn::Module> module,
                                                     const ParallelPlan& plan, const OptimizerFactory& make_optimizer) {
  MPIACCEL_CHECK(module && make_optimizer, "parallelize needs a model and an optimizer factory");
  Mesh& mesh = acc.mesh();
  const int64_t tp = mesh.tp()->size(), cp = mesh.cp()->size(), pp = mesh.pp()->size();
  require_step(static_cast<bool>(plan.tensor), "tp_size", tp,
               "tensor split (ParallelPlan::tensor: tensor_parallelize for a bundled text model, "
               "tp::parallelize_module for a model of your own)");
  require_step(static_cast<bool>(plan.context), "cp_size", cp,
               "context split (ParallelPlan::context: context_parallelize for a bundled text model, "
               "cp::causal_attention in a model of your own)");
  require_step(plan.pipeline != nullptr, "pp_size", pp,
               "pipeline pieces (ParallelPlan::pipeline: a PipelineModel, include/mpiaccel/pipeline_model.hpp)");
  if (tp > 1) plan.tensor(mesh.tp());
  if (cp > 1) plan.context(mesh.cp());
  if (pp > 1) acc.pipeline_parallelize(module, *plan.pipeline);
  std::shared_ptr<torch::optim::Optimizer> optimizer = make_optimizer(*module);
  acc.prepare(std::move(module), optimizer);
  return optimizer;
}

}  // namespace mpiaccel
