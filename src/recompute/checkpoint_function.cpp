// The checkpointed unit as a custom autograd Function (LibTorch has no
// torch.utils.checkpoint in C++). See include/mpiaccel/activation_checkpointing.hpp
// for why the parameters are inputs of the Function.

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/autocast_mode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/nn/module.h>

#include <memory>
#include <mutex>
#include <unordered_set>
#include <utility>
#include <vector>

#include "mpiaccel/activation_checkpointing.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/tensor_parallel.hpp"
#include "runtime/torch_compat.hpp"

namespace mpiaccel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The random-number state of one generator, captured at forward.
struct RngSnapshot {
  at::Generator generator;
  at::Tensor state;
};

RngSnapshot snapshot(at::Generator generator) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  return {generator, generator.get_state()};
}

void restore(const RngSnapshot& snap) {
  at::Generator generator = snap.generator;
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(snap.state);
}

// The thread-local autocast switches of the forward: the recomputation may
// run on an autograd engine thread (CUDA) where they are not set, or after
// the training loop left its autocast region.
struct AutocastSnapshot {
  bool cpu_enabled = false;
  at::ScalarType cpu_dtype = at::kBFloat16;
  bool gpu_enabled = false;
  at::ScalarType gpu_dtype = at::kHalf;

  static AutocastSnapshot current() {
    using c10::DeviceType;
    return {detail::autocast_enabled(DeviceType::CPU), detail::autocast_dtype(DeviceType::CPU),
            detail::autocast_enabled(DeviceType::CUDA), detail::autocast_dtype(DeviceType::CUDA)};
  }
  void apply() const {
    detail::set_autocast(c10::DeviceType::CPU, cpu_enabled, cpu_dtype);
    detail::set_autocast(c10::DeviceType::CUDA, gpu_enabled, gpu_dtype);
  }
};

// Runs the recomputation under the forward's RNG and autocast state, and
// puts the current ones back afterwards (a fork, as torch.utils.checkpoint
// does): the training run's random sequence does not see the recomputation.
class ForwardStateScope {
 public:
  ForwardStateScope(const std::vector<RngSnapshot>& rng, const at::Tensor& region_rng,
                    const AutocastSnapshot& autocast)
      : autocast_before_(AutocastSnapshot::current()), region_rng_before_(tp::RegionRng::state()) {
    for (const RngSnapshot& snap : rng) {
      current_rng_.push_back(snapshot(snap.generator));
      restore(snap);
    }
    // A tensor-parallel region's own stream too (dropout of this rank's heads).
    if (region_rng.defined()) tp::RegionRng::set_state(region_rng);
    autocast.apply();
    // Nesting like torch.autocast's __enter__: the cast cache this fills is
    // dropped when the outermost region ends, never kept into the next step.
    at::autocast::increment_nesting();
  }
  ~ForwardStateScope() {
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    autocast_before_.apply();
    for (const RngSnapshot& snap : current_rng_) restore(snap);
    if (region_rng_before_.defined()) tp::RegionRng::set_state(region_rng_before_);
  }
  ForwardStateScope(const ForwardStateScope&) = delete;
  ForwardStateScope& operator=(const ForwardStateScope&) = delete;

 private:
  AutocastSnapshot autocast_before_;
  at::Tensor region_rng_before_;
  std::vector<RngSnapshot> current_rng_;
};

// What backward needs besides the saved input; travels in the context as a
// capsule (ctx->saved_data holds IValues only).
struct RecomputeState : torch::CustomClassHolder {
  UnitForward forward;
  std::vector<at::Tensor> params;
  std::vector<RngSnapshot> rng;
  at::Tensor region_rng;  ///< tp::RegionRng's stream (undefined without tensor parallelism)
  AutocastSnapshot autocast;
  std::shared_ptr<std::atomic<int64_t>> recomputations;
};

struct CheckpointFunction : torch::autograd::Function<CheckpointFunction> {
  // Called with grad mode off (Function::apply): nothing of the unit's
  // forward is recorded, so its activations are freed as it goes.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, at::TensorList params,
                            c10::intrusive_ptr<RecomputeState> state) {
    // Captured before the unit draws any random number (dropout).
    state->rng.push_back(snapshot(at::detail::getDefaultCPUGenerator()));
    if (input.is_cuda())
      state->rng.push_back(snapshot(at::globalContext().defaultGenerator(input.device())));
    state->region_rng = tp::RegionRng::state();
    state->autocast = AutocastSnapshot::current();
    ctx->save_for_backward({input});
    at::Tensor output = state->forward(input);
    ctx->saved_data["state"] = at::IValue::make_capsule(std::move(state));
    return output;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor input = ctx->get_saved_variables().at(0);
    auto state = c10::static_intrusive_pointer_cast<RecomputeState>(ctx->saved_data.at("state").toCapsule());
    if (state->recomputations) ++*state->recomputations;

    // A detached input: the recomputed graph starts here and ends at the
    // unit's output, so torch::autograd::grad walks this unit only.
    at::Tensor detached = input.detach();
    detached.requires_grad_(input.requires_grad());
    at::Tensor output;
    {
      ForwardStateScope scope(state->rng, state->region_rng, state->autocast);
      at::AutoGradMode enable_grad(true);
      output = state->forward(detached);
    }

    variable_list wrt;
    if (detached.requires_grad()) wrt.push_back(detached);
    for (const at::Tensor& p : state->params) wrt.push_back(p);
    variable_list grads;
    if (output.requires_grad() && !wrt.empty()) {
      grads = torch::autograd::grad({output}, wrt, {grad_outputs.at(0)}, /*retain_graph=*/false,
                                    /*create_graph=*/false, /*allow_unused=*/true);
    } else {
      grads.resize(wrt.size());
    }

    // One gradient per forward input: the input, each parameter, and an
    // undefined one for the state argument.
    variable_list out;
    out.reserve(state->params.size() + 2);
    size_t next = 0;
    if (detached.requires_grad()) {
      at::Tensor g = grads[next++];
      out.push_back(g.defined() ? g : at::zeros_like(input));
    } else {
      out.emplace_back();
    }
    // A zero rather than no gradient: every parameter of a checkpointed unit
    // then reaches its AccumulateGrad, so DDP's hooks fire as they expect.
    for (const at::Tensor& p : state->params) {
      at::Tensor g = grads[next++];
      out.push_back(g.defined() ? g : at::zeros_like(p));
    }
    out.emplace_back();
    return out;
  }
};

}  // namespace

at::Tensor checkpoint_unit(torch::nn::Module& unit, const at::Tensor& input, const UnitForward& forward,
                           std::shared_ptr<std::atomic<int64_t>> recomputations) {
  MPIACCEL_CHECK(input.defined(), "checkpoint_unit: the unit's input is undefined");
  std::vector<at::Tensor> params;
  std::unordered_set<const void*> seen;
  for (const at::Tensor& p : unit.parameters(/*recurse=*/true))
    if (p.requires_grad() && seen.insert(p.unsafeGetTensorImpl()).second) params.push_back(p);
  const bool records = at::GradMode::is_enabled() && (input.requires_grad() || !params.empty());
  if (!records) return forward(input);  // eval / no_grad: nothing to save anyway

  auto state = c10::make_intrusive<RecomputeState>();
  state->forward = forward;  // a copy: it runs again in backward
  state->params = params;
  state->recomputations = std::move(recomputations);
  return CheckpointFunction::apply(input, at::TensorList(params), std::move(state));
}

}  // namespace mpiaccel
