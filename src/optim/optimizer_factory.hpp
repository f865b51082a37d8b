#pragma once
// The optimizer of [optimizer] over a model's parameters.

#include <memory>

#include "mpiaccel/config.hpp"

namespace torch::nn {
class Module;
}
namespace torch::optim {
class Optimizer;
}

namespace mpiaccel::detail {

/// AdamW or SGD over `module`'s parameters in two groups, as nanoGPT and the
/// Transformers Trainer do: matrices and embeddings (dim >= 2) with
/// weight_decay, biases and norms (dim < 2) without: mpiaccel::AdamW or
/// mpiaccel::SGD (mpiaccel/optim.hpp), which pick their fused kernels, or with
/// MPIACCEL_OPTIM_REFERENCE=1 in the environment torch::optim::AdamW or SGD
/// themselves.
std::shared_ptr<torch::optim::Optimizer> make_optimizer(const OptimizerConfig& config,
                                                        torch::nn::Module& module);

/// Sets the learning rate of every parameter group.
void set_learning_rate(torch::optim::Optimizer& optimizer, double lr);

}  // namespace mpiaccel::detail
