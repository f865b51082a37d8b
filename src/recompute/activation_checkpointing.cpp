// The interceptor that checkpoints selected units, and its installation from
// the config.

#include <ATen/core/grad_mode.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "mpiaccel/activation_checkpointing.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/models.hpp"

namespace mpiaccel {

ActivationCheckpointing::ActivationCheckpointing(std::vector<std::string> unit_classes,
                                                 UnitInterceptor* around)
    : unit_classes_(std::move(unit_classes)),
      around_(around),
      recomputations_(std::make_shared<std::atomic<int64_t>>(0)) {
  MPIACCEL_CHECK(around_ != this, "ActivationCheckpointing cannot run around itself");
}

bool ActivationCheckpointing::selects(const torch::nn::Module& unit) const {
  return unit_classes_.empty() ||
         std::find(unit_classes_.begin(), unit_classes_.end(), unit.name()) != unit_classes_.end();
}

at::Tensor ActivationCheckpointing::run(torch::nn::Module& unit, const at::Tensor& input,
                                        const UnitForward& forward) {
  if (!selects(unit) || !at::GradMode::is_enabled())
    return around_ ? around_->run(unit, input, forward) : forward(input);
  ++checkpointed_runs_;
  // `around` (FSDP) gathers the parameters and then calls this, so the
  // checkpoint sees the full parameters as its inputs; FSDP's hook on the
  // checkpoint's output gathers them again before the recomputation.
  std::shared_ptr<std::atomic<int64_t>> counter = recomputations_;
  UnitForward checkpointed = [&unit, forward, counter](const at::Tensor& in) {
    return checkpoint_unit(unit, in, forward, counter);
  };
  return around_ ? around_->run(unit, input, checkpointed) : checkpointed(input);
}

std::unique_ptr<ActivationCheckpointing> enable_activation_checkpointing(torch::nn::Module& model,
                                                                         const Config& config) {
  if (!config.fsdp.activation_checkpointing) return nullptr;
  auto* has_units = dynamic_cast<HasUnits*>(&model);
  MPIACCEL_CHECK(has_units != nullptr,
                 "[fsdp] activation_checkpointing needs a model that runs its units through "
                 "mpiaccel::HasUnits (include/mpiaccel/unit.hpp); model '" + model.name() + "' does not");
  const std::vector<std::string> classes = units_to_wrap(model, config.fsdp.transformer_layer_cls_to_wrap);
  MPIACCEL_CHECK(!classes.empty(), "[fsdp] activation_checkpointing checkpoints the units named by "
                                   "transformer_layer_cls_to_wrap, which is empty (name the classes of a model of your own)");
  for (const std::string& cls : classes) {
    bool found = false;
    for (const auto& m : model.modules(/*include_self=*/false)) found = found || m->name() == cls;
    MPIACCEL_CHECK(found, "[fsdp] activation_checkpointing: model '" + model.name() +
                              "' has no module of class '" + cls +
                              "' (transformer_layer_cls_to_wrap); the bundled units are DecoderLayer "
                              "(gpt), LlamaDecoderLayer (llama) and MlpBlock (mlp)");
  }
  auto checkpointing =
      std::make_unique<ActivationCheckpointing>(classes, has_units->units().interceptor());
  has_units->units().set_interceptor(checkpointing.get());
  return checkpointing;
}

void disable_activation_checkpointing(torch::nn::Module& model,
                                      const ActivationCheckpointing& checkpointing) noexcept {
  auto* has_units = dynamic_cast<HasUnits*>(&model);
  if (has_units && has_units->units().interceptor() == &checkpointing)
    has_units->units().set_interceptor(checkpointing.around());
}

}  // namespace mpiaccel
