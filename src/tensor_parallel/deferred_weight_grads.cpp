// Weight gradients deferred by a zero-bubble pipeline schedule
// (tensor_parallel.hpp, DeferredWeightGrads).

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <mutex>
#include <utility>
#include <vector>

#include "mpiaccel/tensor_parallel.hpp"
#include "tensor_parallel/deferred_linear.hpp"

namespace mpiaccel::tp {

struct DeferredWeightGrads::Store {
  // One deferred weight gradient: dW = dyᵀ·x over all leading dimensions.
  struct Pending {
    at::Tensor weight;       // as the layer used it (a leaf, or a view of one)
    at::Tensor input;        // x
    at::Tensor grad_output;  // dy
  };
  std::mutex mutex;
  std::vector<Pending> pending;
};

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The store of the innermost Recording alive on this thread.
thread_local std::shared_ptr<DeferredWeightGrads::Store>* recording = nullptr;

struct StoreCapsule : torch::CustomClassHolder {
  explicit StoreCapsule(std::shared_ptr<DeferredWeightGrads::Store> s) : store(std::move(s)) {}
  std::shared_ptr<DeferredWeightGrads::Store> store;
};

// y = x·Wᵀ whose backward gives x's gradient and keeps W's work.
struct LinearDeferringWeight : torch::autograd::Function<LinearDeferringWeight> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            c10::intrusive_ptr<StoreCapsule> store) {
    ctx->save_for_backward({x, weight});
    ctx->saved_data["store"] = at::IValue::make_capsule(std::move(store));
    return at::linear(x, weight);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& weight = saved[1];
    const at::Tensor dy = grads[0];
    // Under autocast the output (and its gradient) has the autocast dtype.
    const at::Tensor dx = dy.matmul(weight.to(dy.scalar_type())).to(x.scalar_type());
    auto capsule = c10::static_intrusive_pointer_cast<StoreCapsule>(ctx->saved_data["store"].toCapsule());
    {
      std::lock_guard<std::mutex> lock(capsule->store->mutex);
      capsule->store->pending.push_back({weight, x, dy});
    }
    return {dx, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

DeferredWeightGrads::DeferredWeightGrads() : store_(std::make_shared<Store>()) {}
DeferredWeightGrads::~DeferredWeightGrads() = default;

DeferredWeightGrads::Recording::Recording(DeferredWeightGrads& store) : previous_(recording) {
  recording = &store.store_;
}
DeferredWeightGrads::Recording::~Recording() {
  recording = static_cast<std::shared_ptr<DeferredWeightGrads::Store>*>(previous_);
}

void DeferredWeightGrads::apply() {
  std::vector<Store::Pending> pending;
  {
    std::lock_guard<std::mutex> lock(store_->mutex);
    pending.swap(store_->pending);
  }
  if (pending.empty()) return;
  std::vector<at::Tensor> weights, grads;
  for (const Store::Pending& p : pending) {
    const at::Tensor dy = p.grad_output.reshape({-1, p.grad_output.size(-1)});
    const at::Tensor x = p.input.reshape({-1, p.input.size(-1)}).to(dy.scalar_type());
    weights.push_back(p.weight);
    grads.push_back(dy.t().mm(x).to(p.weight.scalar_type()));
  }
  // Through autograd, so that the weights' gradient hooks fire.
  torch::autograd::backward(weights, grads);
}

size_t DeferredWeightGrads::pending() const {
  std::lock_guard<std::mutex> lock(store_->mutex);
  return store_->pending.size();
}

namespace detail {

at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (recording == nullptr || !at::GradMode::is_enabled() || !weight.requires_grad())
    return at::linear(x, weight, bias);
  // The bias outside the function (autograd computes its gradient at once):
  // a custom function takes no undefined inputs.
  const at::Tensor y = LinearDeferringWeight::apply(x, weight, c10::make_intrusive<StoreCapsule>(*recording));
  return bias.defined() ? y + bias : y;
}

}  // namespace detail
}  // namespace mpiaccel::tp
