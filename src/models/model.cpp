// The model factory and the bridges between Model and torch::nn::Module.

#include <torch/nn/module.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/causal_lm.hpp"
#include "models/deferred.hpp"
#include "models/no_computation.hpp"
#include "mpiaccel/context_parallel.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/model_family.hpp"
#include "mpiaccel/models.hpp"

namespace mpiaccel {

ModelSpec ModelSpec::from(const ModelConfig& model, int64_t seq_len) {
  ModelSpec spec;
  static_cast<ModelConfig&>(spec) = model;
  spec.block_size = seq_len;
  return spec;
}

std::shared_ptr<Model> make_model(const std::string& kind, const ModelSpec& spec,
                                  const ModelInit& init) {
  std::optional<detail::DeferredBuildScope> unmapping;
  if (init.deferred) unmapping.emplace();
  return model_family(kind).make(spec, init);
}

std::shared_ptr<Model> make_model_shapes(const std::string& kind, const ModelSpec& spec) {
  detail::NoComputation no_computation;
  ModelInit init;
  init.deferred = true;  // each module's memory given back once it is built
  return make_model(kind, spec, init);
}

void tensor_parallelize(Model& model, std::shared_ptr<Communicator> group, bool sequence_parallel) {
  auto* text = dynamic_cast<detail::TextModel*>(&model);
  MPIACCEL_CHECK(text != nullptr, "tensor parallelism splits the bundled text models, not a " + model.kind() +
                                      "; split a model of your own with tp::parallelize_module");
  text->parallelize(std::move(group), sequence_parallel);
}

void context_parallelize(Model& model, std::shared_ptr<Communicator> group, CpCommStrategy exchange) {
  auto* text = dynamic_cast<detail::TextModel*>(&model);
  MPIACCEL_CHECK(text != nullptr, "context parallelism splits the sequence of the bundled text models, not of a " +
                                      model.kind() + "; a model of your own calls cp::causal_attention");
  text->context_parallelize(std::move(group), exchange);
}

at::Tensor whole_logits(Model& model, const at::Tensor& tokens) {
  auto* text = dynamic_cast<detail::TextModel*>(&model);
  return text ? text->whole_logits(tokens) : model.forward(tokens);
}

std::vector<std::string> model_unit_classes(const std::string& kind) { return model_family(kind).unit_classes; }

std::vector<std::string> units_to_wrap(const torch::nn::Module& model, const std::string& configured) {
  if (!configured.empty()) return split_list(configured);
  const auto* bundled = dynamic_cast<const Model*>(&model);
  return bundled ? model_unit_classes(bundled->kind()) : std::vector<std::string>{};
}

bool has_deferred_parameters(const torch::nn::Module& module) {
  for (const at::Tensor& p : module.parameters(/*recurse=*/true))
    if (p.numel() > 0 && p.has_storage() && p.storage().data() == nullptr) return true;
  return false;
}

std::shared_ptr<torch::nn::Module> as_module(const std::shared_ptr<Model>& model) {
  if (!model) return nullptr;
  // Aliasing: the Module pointer shares the Model's ownership.
  return std::shared_ptr<torch::nn::Module>(model, &model->module());
}

std::shared_ptr<Model> as_model(const std::shared_ptr<torch::nn::Module>& module) {
  return std::dynamic_pointer_cast<Model>(module);
}

int64_t parameter_count(Model& model) {
  int64_t count = 0;
  for (const at::Tensor& p : model.module().parameters()) count += p.numel();
  return count;
}

}  // namespace mpiaccel
