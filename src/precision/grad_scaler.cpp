// GradScaler: dynamic loss scaling with the found-inf flag agreed across ranks.

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/optim/optimizer.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "mpiaccel/comm.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/precision.hpp"

namespace mpiaccel {
namespace {

std::string exact(double value) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.17g", value);
  return text;
}

const std::string& entry(const std::map<std::string, std::string>& state, const std::string& key) {
  auto it = state.find(key);
  MPIACCEL_CHECK(it != state.end(), "GradScaler state has no '" + key +
                                        "' (a checkpoint written without loss scaling?)");
  return it->second;
}

}  // namespace

GradScaler::GradScaler(GradScalerOptions options, std::shared_ptr<Communicator> comm,
                       const std::string& flag_device)
    : options_(options), comm_(std::move(comm)), flag_device_(flag_device), scale_(options.init_scale) {
  MPIACCEL_CHECK(options_.init_scale > 0 && std::isfinite(options_.init_scale),
                 "GradScaler: init_scale must be a positive finite number");
  MPIACCEL_CHECK(options_.growth_factor > 1.0, "GradScaler: growth_factor must be above 1");
  MPIACCEL_CHECK(options_.backoff_factor > 0.0 && options_.backoff_factor < 1.0,
                 "GradScaler: backoff_factor must be in (0, 1)");
  MPIACCEL_CHECK(options_.growth_interval >= 1, "GradScaler: growth_interval must be at least 1");
}

at::Tensor GradScaler::scale(const at::Tensor& loss) const {
  if (!options_.enabled) return loss;
  // In the loss's dtype would round S in fp16 (65536 is fp16's largest
  // power of two, 2·65536 overflows): scale in fp32 like torch's scaler.
  return loss.to(at::kFloat) * scale_;
}

void GradScaler::unscale_(const std::vector<at::Tensor>& grads) {
  if (unscaled_) return;  // clip_grad_norm already did it this step
  unscaled_ = true;
  if (!options_.enabled) return;
  const double inverse = 1.0 / scale_;
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> on_gpu;
  for (const at::Tensor& grad : grads) {
    if (!grad.defined()) continue;
    if (grad.is_cuda()) {
      on_gpu.push_back(grad);
    } else {
      grad.mul_(inverse);
      // isfinite after the multiply: inf·x stays inf and nan stays nan.
      local_found_inf_ = local_found_inf_ || !at::isfinite(grad).all().item<bool>();
    }
  }
  if (!on_gpu.empty()) {
    // One fused kernel over all of them (one rank drives one GPU); the flag
    // stays on the device until agree_finite() reduces it there, so the
    // step costs one host sync, after the all-reduce.
    const at::TensorOptions options = on_gpu.front().options().dtype(at::kFloat);
    device_found_inf_ = at::zeros({1}, options);
    at::Tensor inv = at::full({1}, inverse, options);
    at::_amp_foreach_non_finite_check_and_unscale_(on_gpu, device_found_inf_, inv);
  }
}

bool GradScaler::agree_finite() {
  if (agreed_) return !agreed_found_inf_;
  MPIACCEL_CHECK(!options_.enabled || unscaled_,
                 "GradScaler: agree_finite()/step() before unscale_(): the gradients are still "
                 "multiplied by the scale; call unscale_(grads) first");
  bool found = local_found_inf_;
  // Disabled (fp32/bf16 runs): nothing was checked, so nothing to agree on;
  // no collective per step.
  if (options_.enabled) {
    at::Tensor flag = at::full({1}, found ? 1.0 : 0.0, at::TensorOptions(at::kFloat).device(flag_device_));
    if (device_found_inf_.defined()) flag = at::maximum(flag, device_found_inf_.to(flag.device()));
    // One all_reduce of a one-element flag: ZeRO/FSDP ranks check different
    // shards, and a rank that stepped alone would leave the replicas apart.
    if (comm_ && comm_->size() > 1) comm_->all_reduce(flag, ReduceOp::Max);
    found = flag.item<float>() > 0;
    device_found_inf_ = at::Tensor();
  }
  agreed_ = true;
  agreed_found_inf_ = found;
  return !found;
}

bool GradScaler::step(const std::function<void()>& optimizer_step) {
  if (!agree_finite()) {
    ++skipped_steps_;
    return false;
  }
  optimizer_step();
  return true;
}

void GradScaler::update() {
  MPIACCEL_CHECK(agreed_, "GradScaler: update() without step()/agree_finite() since the last update: "
                          "no inf check was recorded for this step");
  if (options_.enabled) {
    if (agreed_found_inf_) {
      scale_ *= options_.backoff_factor;
      growth_tracker_ = 0;
    } else if (++growth_tracker_ >= options_.growth_interval) {
      // torch.cuda.amp keeps the scale finite: growth that would overflow fp32 is dropped.
      const double grown = scale_ * options_.growth_factor;
      if (std::isfinite(float(grown))) scale_ = grown;
      growth_tracker_ = 0;
    }
  }
  unscaled_ = false;
  local_found_inf_ = false;
  device_found_inf_ = at::Tensor();
  agreed_ = false;
  agreed_found_inf_ = false;
}

std::map<std::string, std::string> GradScaler::state() const {
  return {{"scale", exact(scale_)}, {"growth_tracker", std::to_string(growth_tracker_)}};
}

void GradScaler::load_state(const std::map<std::string, std::string>& state) {
  const std::string& scale_text = entry(state, "scale");
  const std::string& tracker_text = entry(state, "growth_tracker");
  char* end = nullptr;
  const double scale = std::strtod(scale_text.c_str(), &end);
  MPIACCEL_CHECK(end && *end == '\0' && !scale_text.empty() && scale > 0 && std::isfinite(scale),
                 "GradScaler state: scale '" + scale_text + "' is not a positive finite number");
  end = nullptr;
  const long long tracker = std::strtoll(tracker_text.c_str(), &end, 10);
  MPIACCEL_CHECK(end && *end == '\0' && !tracker_text.empty() && tracker >= 0,
                 "GradScaler state: growth_tracker '" + tracker_text + "' is not a count");
  scale_ = scale;
  growth_tracker_ = tracker;
  skipped_steps_ = 0;
  unscaled_ = local_found_inf_ = agreed_ = agreed_found_inf_ = false;
}

std::vector<at::Tensor> optimizer_grads(torch::optim::Optimizer& optimizer) {
  std::vector<at::Tensor> grads;
  for (auto& group : optimizer.param_groups())
    for (auto& param : group.params())
      if (param.grad().defined()) grads.push_back(param.grad());
  return grads;
}

}  // namespace mpiaccel
