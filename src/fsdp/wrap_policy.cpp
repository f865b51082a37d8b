// FSDP wrap policies (see wrap_policy.hpp).

#include "fsdp/wrap_policy.hpp"

#include <torch/nn/module.h>

#include <map>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "mpiaccel/error.hpp"
#include "mpiaccel/log.hpp"
#include "mpiaccel/models.hpp"

namespace mpiaccel::detail {
namespace {

int64_t own_numel(const torch::nn::Module& module) {
  int64_t n = 0;
  for (const auto& p : module.named_parameters(/*recurse=*/false)) n += p.value().numel();
  return n;
}

// Parameter elements of a subtree, each tensor counted once.
int64_t subtree_numel(const torch::nn::Module& module) {
  std::unordered_set<const void*> seen;
  int64_t n = 0;
  for (const auto& p : module.parameters(/*recurse=*/true))
    if (seen.insert(p.unsafeGetTensorImpl()).second) n += p.numel();
  return n;
}

struct SizePolicy {
  int64_t min_numel;
  std::vector<torch::nn::Module*> chosen;

  // Returns the parameter count of `module`'s subtree not yet in a unit.
  int64_t visit(torch::nn::Module& module, bool is_root) {
    int64_t left = own_numel(module);
    for (const auto& child : module.children()) left += visit(*child, false);
    if (!is_root && left > 0 && left >= min_numel) {
      chosen.push_back(&module);
      return 0;
    }
    return left;
  }
};

}  // namespace

std::string module_classes(const torch::nn::Module& model) {
  std::set<std::string> classes;
  classes.insert(model.name());
  for (const auto& m : model.modules(/*include_self=*/false)) classes.insert(m->name());
  std::string text;
  for (const std::string& c : classes) text += (text.empty() ? "" : ", ") + c;
  return text;
}

namespace {

// The modules of the classes transformer_layer_cls_to_wrap names (or the
// bundled model's unit classes).
std::unordered_set<const torch::nn::Module*> picked_by_class(torch::nn::Module& model, const FsdpConfig& config) {
  std::unordered_set<const torch::nn::Module*> picked;
  const std::vector<std::string> wanted = units_to_wrap(model, config.transformer_layer_cls_to_wrap);
  MPIACCEL_CHECK(!wanted.empty(),
                 "[fsdp] auto_wrap_policy = TRANSFORMER_BASED_WRAP needs "
                 "transformer_layer_cls_to_wrap (module class names, comma-separated) for a model "
                 "that is not a bundled one; "
                 "the model's module classes are: " + module_classes(model));
  std::map<std::string, int> found;
  for (const std::string& w : wanted) found[w] = 0;
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    auto it = found.find(item.value()->name());
    if (it == found.end()) continue;
    ++it->second;
    picked.insert(item.value().get());
  }
  for (const auto& [cls, count] : found)
    MPIACCEL_CHECK(count > 0, "[fsdp] transformer_layer_cls_to_wrap names class '" + cls +
                                  "', which no module of the model has; the model's module "
                                  "classes are: " + module_classes(model) +
                                  " (the name is Module::name(), the string a module passes "
                                  "to torch::nn::Module's constructor)");
  return picked;
}

// The smallest modules of at least min_num_params, each moved up to the
// largest parent that holds no more.
std::unordered_set<const torch::nn::Module*> picked_by_size(torch::nn::Module& model, const FsdpConfig& config) {
  std::unordered_set<const torch::nn::Module*> picked;
  MPIACCEL_CHECK(config.min_num_params >= 1, "[fsdp] min_num_params must be >= 1");
  SizePolicy size{config.min_num_params, {}};
  size.visit(model, true);
  // Parent of every module, to move a choice up to an identical parent.
  std::unordered_map<const torch::nn::Module*, torch::nn::Module*> parent;
  for (const auto& m : model.modules(/*include_self=*/true))
    for (const auto& child : m->children()) parent[child.get()] = m.get();
  for (torch::nn::Module* m : size.chosen) {
    const int64_t numel = subtree_numel(*m);
    auto it = parent.find(m);
    while (it != parent.end() && it->second != &model && subtree_numel(*it->second) == numel &&
           !picked.count(it->second)) {
      m = it->second;
      it = parent.find(m);
    }
    picked.insert(m);
  }
  if (picked.empty())
    log_warn("FSDP: SIZE_BASED_WRAP with min_num_params = " +
             std::to_string(config.min_num_params) +
             " picks no module (the largest holds fewer parameters); the whole model is "
             "one unit, as with NO_WRAP");
  return picked;
}

}  // namespace

std::vector<PlannedUnit> plan_units(torch::nn::Module& model, const FsdpConfig& config) {
  std::unordered_set<const torch::nn::Module*> picked;
  switch (config.auto_wrap_policy) {
    case WrapPolicy::NoWrap: return {};
    case WrapPolicy::TransformerBasedWrap: picked = picked_by_class(model, config); break;
    case WrapPolicy::SizeBasedWrap: picked = picked_by_size(model, config); break;
  }
  std::vector<PlannedUnit> units;
  for (const auto& item : model.named_modules("", /*include_self=*/false))
    if (picked.count(item.value().get())) units.push_back({item.key(), item.value().get()});
  return units;
}

}  // namespace mpiaccel::detail
