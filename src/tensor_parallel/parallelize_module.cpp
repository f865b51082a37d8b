// parallelize_module: a plan's patterns matched against a model's module
// names, each match split by its style (tensor_parallel.hpp).

#include <fnmatch.h>

#include <string>
#include <vector>

#include "mpiaccel/error.hpp"
#include "mpiaccel/tensor_parallel.hpp"

namespace mpiaccel::tp {
namespace {

std::vector<std::string> parts_of(const std::string& dotted) {
  std::vector<std::string> parts{""};
  for (char c : dotted) {
    if (c == '.') parts.emplace_back();
    else parts.back() += c;
  }
  return parts;
}

// Part by part, each a shell pattern ('*' never crosses a dot).
bool matches(const std::string& pattern, const std::string& name) {
  const std::vector<std::string> want = parts_of(pattern);
  const std::vector<std::string> have = parts_of(name);
  if (want.size() != have.size()) return false;
  for (size_t i = 0; i < want.size(); ++i)
    if (fnmatch(want[i].c_str(), have[i].c_str(), 0) != 0) return false;
  return true;
}

void split(torch::nn::Module& module, const std::string& name, const Style& style,
           const std::shared_ptr<Communicator>& group) {
  if (auto* linear = dynamic_cast<Linear*>(&module)) {
    linear->parallelize(style, group);
  } else if (auto* embedding = dynamic_cast<Embedding*>(&module)) {
    embedding->parallelize(style, group);
  } else {
    MPIACCEL_CHECK(false, "tensor parallelism: the plan splits " + name + ", a " + module.name() +
                              "; a plan splits tp::Linear and tp::Embedding modules (write them where the model "
                              "has torch::nn::Linear and Embedding)");
  }
}

}  // namespace

std::vector<std::string> parallelize_module(torch::nn::Module& model, const std::shared_ptr<Communicator>& group,
                                            const Plan& plan) {
  std::vector<bool> used(plan.size(), false);
  std::vector<std::string> done;
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    for (size_t i = 0; i < plan.size(); ++i) {
      if (!matches(plan[i].first, item.key())) continue;
      split(*item.value(), item.key(), plan[i].second, group);
      used[i] = true;
      done.push_back(item.key());
      break;
    }
  }
  for (size_t i = 0; i < plan.size(); ++i)
    MPIACCEL_CHECK(used[i], "tensor parallelism: the plan's pattern '" + plan[i].first +
                                "' matches no module of the model (names are dotted paths such as "
                                "'layers.0.fc'; '*' matches one part)");
  return done;
}

}  // namespace mpiaccel::tp
