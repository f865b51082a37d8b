#pragma once
// Which modules become FSDP units ([fsdp] auto_wrap_policy).
//
// - TRANSFORMER_BASED_WRAP: every module whose Module::name() (its class name,
//   e.g. "DecoderLayer") is in transformer_layer_cls_to_wrap (comma-separated).
//   A listed class that no module of the model has is an error naming the
//   classes that do exist (as Accelerate does), so a typo cannot silently turn
//   FSDP into "everything in the root".
// - SIZE_BASED_WRAP: PyTorch's size_based_auto_wrap_policy: modules visited
//   children first; a module becomes a unit when the parameters in its subtree
//   not already in a unit number at least min_num_params. One refinement: when
//   a chosen module's parent holds exactly the same parameters (an MlpBlock
//   around its Linear), the parent is chosen instead, since the parent is the
//   module a model runs through units().run. Matching nothing is allowed (a
//   warning): the model is then one unit, as with NO_WRAP.
// - NO_WRAP: no unit; the root holds everything.
// The model itself is never a unit of the list: the root unit holds whatever
// parameters the units leave over. Nested units are allowed: a parameter
// belongs to the innermost unit containing it.

#include <string>
#include <vector>

#include "mpiaccel/config.hpp"

namespace torch::nn {
class Module;
}

namespace mpiaccel::detail {

struct PlannedUnit {
  std::string name;            ///< the module's path ("blocks.0")
  torch::nn::Module* module;   ///< owned by the model
};

/// The units `config` picks in `model`, in module pre-order. Throws
/// mpiaccel::Error for an unknown policy or unknown class names.
std::vector<PlannedUnit> plan_units(torch::nn::Module& model, const FsdpConfig& config);

/// "DecoderLayer, FeedForward, GPT, ..." : the distinct class names of the
/// model's modules, for messages.
std::string module_classes(const torch::nn::Module& model);

}  // namespace mpiaccel::detail
