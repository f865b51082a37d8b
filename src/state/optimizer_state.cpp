// Named access to LibTorch's Adam/AdamW/SGD per-parameter state.

#include "state/optimizer_state.hpp"

#include <ATen/ATen.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <sstream>

#include "mpiaccel/error.hpp"
#include "runtime/torch_compat.hpp"

namespace mpiaccel {
namespace {

using torch::optim::Adam;
using torch::optim::AdamOptions;
using torch::optim::AdamParamState;
using torch::optim::AdamW;
using torch::optim::AdamWOptions;
using torch::optim::AdamWParamState;
using torch::optim::Optimizer;
using torch::optim::OptimizerParamGroup;
using torch::optim::SGD;
using torch::optim::SGDOptions;
using torch::optim::SGDParamState;

const OptimizerParamGroup& group_of(const Optimizer& optimizer, const at::Tensor& param) {
  for (const OptimizerParamGroup& group : optimizer.param_groups())
    for (const at::Tensor& p : group.params())
      if (p.unsafeGetTensorImpl() == param.unsafeGetTensorImpl()) return group;
  MPIACCEL_THROW("optimizer state: a parameter of shape " + c10::str(param.sizes()) +
                 " is not in any of the optimizer's parameter groups; build the optimizer "
                 "over model->parameters() before prepare()");
}

template <typename State>
State* find_state(Optimizer& optimizer, const at::Tensor& param) {
  auto it = optimizer.state().find(detail::optimizer_state_key(optimizer, param));
  if (it == optimizer.state().end()) return nullptr;
  return static_cast<State*>(it->second.get());
}

template <typename State>
const State* find_state(const Optimizer& optimizer, const at::Tensor& param) {
  auto it = optimizer.state().find(detail::optimizer_state_key(optimizer, param));
  if (it == optimizer.state().end()) return nullptr;
  return static_cast<const State*>(it->second.get());
}

// Adam and AdamW have the same state layout but unrelated types.
template <typename State, typename Options>
std::vector<OptimizerSlot> adam_slots(Optimizer& optimizer, const at::Tensor& param, bool create) {
  State* state = find_state<State>(optimizer, param);
  const bool amsgrad = static_cast<const Options&>(group_of(optimizer, param).options()).amsgrad();
  if (!state) {
    if (!create) return {};
    auto fresh = std::make_unique<State>();
    fresh->step(0);
    fresh->exp_avg(at::zeros_like(param, at::MemoryFormat::Preserve));
    fresh->exp_avg_sq(at::zeros_like(param, at::MemoryFormat::Preserve));
    if (amsgrad) fresh->max_exp_avg_sq(at::zeros_like(param, at::MemoryFormat::Preserve));
    state = fresh.get();
    optimizer.state()[detail::optimizer_state_key(optimizer, param)] = std::move(fresh);
  }
  std::vector<OptimizerSlot> slots{{"exp_avg", state->exp_avg()}, {"exp_avg_sq", state->exp_avg_sq()}};
  if (amsgrad) slots.push_back({"max_exp_avg_sq", state->max_exp_avg_sq()});
  return slots;
}

template <typename State>
void set_adam_step(Optimizer& optimizer, const at::Tensor& param, int64_t step) {
  State* state = find_state<State>(optimizer, param);
  MPIACCEL_CHECK(state, "set_optimizer_param_step: no optimizer state for the parameter; "
                        "create it with optimizer_slots(..., create_missing = true) first");
  state->step(step);
}

std::string number(double value) {
  std::ostringstream out;
  out.precision(17);
  out << value;
  return out.str();
}

}  // namespace

OptimizerType optimizer_type(const Optimizer& optimizer) {
  if (dynamic_cast<const AdamW*>(&optimizer)) return OptimizerType::AdamW;
  if (dynamic_cast<const Adam*>(&optimizer)) return OptimizerType::Adam;
  if (dynamic_cast<const SGD*>(&optimizer)) return OptimizerType::Sgd;
  MPIACCEL_THROW("optimizer state: unsupported optimizer type (supported: torch::optim::AdamW, "
                 "Adam, SGD)");
}

std::string optimizer_kind(const Optimizer& optimizer) {
  switch (optimizer_type(optimizer)) {
    case OptimizerType::AdamW: return "adamw";
    case OptimizerType::Adam: return "adam";
    case OptimizerType::Sgd: return "sgd";
  }
  return "?";
}

std::vector<OptimizerSlot> optimizer_slots(Optimizer& optimizer, const at::Tensor& param,
                                           bool create_missing) {
  const OptimizerType kind = optimizer_type(optimizer);
  if (kind == OptimizerType::AdamW) return adam_slots<AdamWParamState, AdamWOptions>(optimizer, param, create_missing);
  if (kind == OptimizerType::Adam) return adam_slots<AdamParamState, AdamOptions>(optimizer, param, create_missing);
  const auto& options = static_cast<const SGDOptions&>(group_of(optimizer, param).options());
  if (options.momentum() == 0) return {};  // SGD without momentum keeps no state
  SGDParamState* state = find_state<SGDParamState>(optimizer, param);
  if (!state) {
    if (!create_missing) return {};
    auto fresh = std::make_unique<SGDParamState>();
    fresh->momentum_buffer(at::zeros_like(param, at::MemoryFormat::Preserve));
    state = fresh.get();
    optimizer.state()[detail::optimizer_state_key(optimizer, param)] = std::move(fresh);
  }
  return {{"momentum_buffer", state->momentum_buffer()}};
}

int64_t optimizer_param_step(const Optimizer& optimizer, const at::Tensor& param) {
  const OptimizerType kind = optimizer_type(optimizer);
  if (kind == OptimizerType::AdamW) {
    const auto* state = find_state<AdamWParamState>(optimizer, param);
    return state ? state->step() : 0;
  }
  if (kind == OptimizerType::Adam) {
    const auto* state = find_state<AdamParamState>(optimizer, param);
    return state ? state->step() : 0;
  }
  return 0;
}

void set_optimizer_param_step(Optimizer& optimizer, const at::Tensor& param, int64_t step) {
  const OptimizerType kind = optimizer_type(optimizer);
  if (kind == OptimizerType::AdamW) set_adam_step<AdamWParamState>(optimizer, param, step);
  if (kind == OptimizerType::Adam) set_adam_step<AdamParamState>(optimizer, param, step);
}

int64_t optimizer_step(const Optimizer& optimizer) {
  int64_t step = 0;
  for (const OptimizerParamGroup& group : optimizer.param_groups())
    for (const at::Tensor& p : group.params())
      step = std::max(step, optimizer_param_step(optimizer, p));
  return step;
}

std::map<std::string, std::string> optimizer_attributes(const Optimizer& optimizer) {
  const OptimizerType kind = optimizer_type(optimizer);
  std::map<std::string, std::string> out{{"optimizer", optimizer_kind(optimizer)},
                                         {"optimizer.step", std::to_string(optimizer_step(optimizer))}};
  const auto& groups = optimizer.param_groups();
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::string prefix = "optimizer.group" + std::to_string(g) + ".";
    if (kind != OptimizerType::Sgd) {
      // Same fields in both option types.
      auto put = [&](const auto& o) {
        out[prefix + "lr"] = number(o.lr());
        out[prefix + "beta1"] = number(std::get<0>(o.betas()));
        out[prefix + "beta2"] = number(std::get<1>(o.betas()));
        out[prefix + "eps"] = number(o.eps());
        out[prefix + "weight_decay"] = number(o.weight_decay());
        out[prefix + "amsgrad"] = o.amsgrad() ? "true" : "false";
      };
      if (kind == OptimizerType::AdamW) put(static_cast<const AdamWOptions&>(groups[g].options()));
      else put(static_cast<const AdamOptions&>(groups[g].options()));
    } else {
      const auto& o = static_cast<const SGDOptions&>(groups[g].options());
      out[prefix + "lr"] = number(o.lr());
      out[prefix + "momentum"] = number(o.momentum());
      out[prefix + "dampening"] = number(o.dampening());
      out[prefix + "weight_decay"] = number(o.weight_decay());
      out[prefix + "nesterov"] = o.nesterov() ? "true" : "false";
    }
  }
  return out;
}

int64_t optimizer_state_bytes(const Optimizer& optimizer) {
  int64_t bytes = 0;
  auto& mutable_optimizer = const_cast<Optimizer&>(optimizer);  // slots() only reads without create
  for (const OptimizerParamGroup& group : optimizer.param_groups())
    for (const at::Tensor& p : group.params())
      for (const OptimizerSlot& slot : optimizer_slots(mutable_optimizer, p))
        if (slot.tensor.defined()) bytes += slot.tensor.numel() * slot.tensor.element_size();
  return bytes;
}

}  // namespace mpiaccel
