#include "state/param_list.hpp"

#include <torch/nn/module.h>

#include <unordered_set>

namespace mpiaccel::detail {

ParamList trainable_params(const torch::nn::Module& module) {
  ParamList list;
  std::unordered_set<const void*> seen;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    const at::Tensor& p = item.value();
    if (!p.requires_grad() || !seen.insert(p.unsafeGetTensorImpl()).second) continue;
    list.params.push_back(p);
    list.names.push_back(item.key());
  }
  return list;
}

}  // namespace mpiaccel::detail
