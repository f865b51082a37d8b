#pragma once
// The parameters a strategy trains, listed once each.

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

namespace torch::nn {
class Module;
}

namespace mpiaccel::detail {

/// The module's distinct parameters that require grad, with their names
/// (a tied weight registered under two names is listed once, first name).
struct ParamList {
  std::vector<at::Tensor> params;
  std::vector<std::string> names;
};
ParamList trainable_params(const torch::nn::Module& module);

}  // namespace mpiaccel::detail
