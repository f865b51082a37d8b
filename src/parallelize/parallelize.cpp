// parallelize() and the bundled models' plan (include/mpiaccel/parallelize.hpp):
// the one place the splits are applied, in their order, and handed to the
// Accelerator as ModelSplits.

#include "mpiaccel/parallelize.hpp"

#include <string>
#include <utility>

#include "mpiaccel/accelerator.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/model_family.hpp"
#include "mpiaccel/models.hpp"
#include "mpiaccel/pipeline.hpp"
#include "mpiaccel/pipeline_model.hpp"
#include "parallelize/tensor_split.hpp"

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
  if (tp > 1) {
    plan.tensor(mesh.tp());
    acc.add_split(detail::tensor_split_of(*module, mesh.tp()));
  }
  if (cp > 1) plan.context(mesh.cp());
  if (pp > 1) pipeline_parallelize(acc, module, *plan.pipeline);
  std::shared_ptr<torch::optim::Optimizer> optimizer = make_optimizer(*module);
  acc.prepare(std::move(module), optimizer);
  return optimizer;
}

Pipeline& pipeline_parallelize(Accelerator& acc, std::shared_ptr<torch::nn::Module> module, PipelineModel& model) {
  MPIACCEL_CHECK(!acc.model() && !pipeline_of(acc), "pipeline_parallelize: call it once, before prepare()");
  const Config& config = acc.config();
  const ParallelismConfig& pc = config.parallelism;
  PipelineOptions options;
  options.group = acc.mesh().pp();
  options.schedule = pc.pp_schedule;
  options.virtual_stages = pc.pp_virtual_stages;
  options.microbatches = pc.pp_microbatches > 0 ? pc.pp_microbatches : config.train.grad_accum_steps;
  options.layers = pc.pp_layers;
  options.strategy = &acc.strategy();
  options.strategy_name = name_of(config.distributed.strategy);
  options.strategy_shards_gradients = strategy_kind(config) == StrategyKind::Zero2 || shards_parameters(config);
  options.scaler = &acc.grad_scaler();
  options.device = acc.device();
  options.compute_dtype = acc.precision().param_dtype;
  auto pipeline = std::make_shared<Pipeline>(std::move(options), std::move(module), model);
  acc.add_split(pipeline);
  return *pipeline;
}

Pipeline* pipeline_of(const Accelerator& acc) {
  for (const auto& split : acc.splits())
    if (auto* pipeline = dynamic_cast<Pipeline*>(split.get())) return pipeline;
  return nullptr;
}

}  // namespace mpiaccel
