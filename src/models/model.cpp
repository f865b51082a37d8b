// The model factory and the bridges between Model and torch::nn::Module.

#include <torch/nn/module.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/causal_lm.hpp"
#include "models/deferred.hpp"
#include "models/families.hpp"
#include "mpiaccel/context_parallel.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/models.hpp"

namespace mpiaccel {

ModelSpec ModelSpec::from(const ModelConfig& model, int64_t seq_len) {
  ModelSpec spec;
  spec.n_layer = model.n_layer;
  spec.n_head = model.n_head;
  spec.n_embd = model.n_embd;
  spec.vocab_size = model.vocab_size;
  spec.block_size = seq_len;
  spec.dropout = model.dropout;
  spec.hidden_size = model.hidden_size;
  spec.mlp_layers = model.mlp_layers;
  spec.activation = model.activation;
  spec.n_kv_head = model.n_kv_head;
  spec.head_dim = model.head_dim;
  spec.intermediate_size = model.intermediate_size;
  spec.rope_theta = model.rope_theta;
  spec.rope_scaling = model.rope_scaling;
  spec.rope_scaling_factor = model.rope_scaling_factor;
  spec.rope_low_freq_factor = model.rope_low_freq_factor;
  spec.rope_high_freq_factor = model.rope_high_freq_factor;
  spec.rope_original_max_positions = model.rope_original_max_positions;
  spec.rms_norm_eps = model.rms_norm_eps;
  spec.attention_bias = model.attention_bias;
  spec.mlp_bias = model.mlp_bias;
  spec.tie_word_embeddings = model.tie_word_embeddings;
  return spec;
}

std::shared_ptr<Model> make_model(const std::string& kind, const ModelSpec& spec,
                                  const ModelInit& init) {
  std::optional<detail::DeferredBuildScope> unmapping;
  if (init.deferred) unmapping.emplace();
  if (kind == "gpt") return detail::make_gpt(spec, init);
  if (kind == "llama") return detail::make_llama(spec, init);
  if (kind == "mlp") return detail::make_mlp(spec, init);
  if (kind == "cnn") return detail::make_cnn(spec, init);
  MPIACCEL_THROW("model '" + kind + "' is unknown; accepted: gpt, llama, mlp, cnn");
}

void tensor_parallelize(Model& model, std::shared_ptr<Communicator> group, bool sequence_parallel) {
  auto* text = dynamic_cast<detail::TextModel*>(&model);
  MPIACCEL_CHECK(text != nullptr, "tensor parallelism splits the bundled gpt and llama, not a " + model.kind() +
                                      "; split a model of your own with tp::parallelize_module");
  text->parallelize(std::move(group), sequence_parallel);
}

void context_parallelize(Model& model, std::shared_ptr<Communicator> group, const std::string& exchange) {
  auto* text = dynamic_cast<detail::TextModel*>(&model);
  MPIACCEL_CHECK(text != nullptr, "context parallelism splits the sequence of the bundled gpt and llama, not of a " +
                                      model.kind() + "; a model of your own calls cp::causal_attention");
  text->context_parallelize(std::move(group), cp::exchange_named(exchange));
}

at::Tensor whole_logits(Model& model, const at::Tensor& tokens) {
  auto* text = dynamic_cast<detail::TextModel*>(&model);
  return text ? text->whole_logits(tokens) : model.forward(tokens);
}

std::vector<std::string> model_unit_classes(const std::string& kind) {
  if (kind == "gpt") return {"DecoderLayer"};
  if (kind == "llama") return {"LlamaDecoderLayer"};
  if (kind == "mlp") return {"MlpBlock"};
  return {};
}

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
