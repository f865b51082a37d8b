#include "grad_sync/grad_ready_hooks.hpp"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include "mpiaccel/error.hpp"

namespace mpiaccel::detail {

GradReadyHooks::GradReadyHooks(const std::vector<at::Tensor>& params,
                               const std::vector<std::string>& names, const std::string& owner,
                               std::function<void(size_t)> on_ready) {
  auto callback = std::make_shared<std::function<void(size_t)>>(std::move(on_ready));
  for (size_t i = 0; i < params.size(); ++i) {
    accumulators_.push_back(torch::autograd::impl::grad_accumulator(params[i]));
    MPIACCEL_CHECK(accumulators_.back(), owner + ": no gradient accumulator for " +
                                             (i < names.size() ? names[i] : std::to_string(i)));
    keys_.push_back(accumulators_.back()->add_post_hook(
        std::make_unique<torch::autograd::utils::LambdaPostHook>(
            [callback, i](const torch::autograd::variable_list& outputs,
                          const torch::autograd::variable_list& /*inputs*/) {
              (*callback)(i);
              return outputs;
            })));
  }
}

GradReadyHooks::~GradReadyHooks() {
  for (size_t i = 0; i < accumulators_.size(); ++i) accumulators_[i]->del_post_hook(keys_[i]);
}

}  // namespace mpiaccel::detail
