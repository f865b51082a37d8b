// The bundled models' footprints and activations, each from its family's
// closed form (include/mpiaccel/model_family.hpp), and the footprint counted
// from a built model. tests/unit/test_estimate.cpp checks every family's
// closed form against count_footprint.

#include <torch/nn/module.h>

#include <algorithm>
#include <string>
#include <unordered_set>
#include <vector>

#include "mpiaccel/error.hpp"
#include "mpiaccel/estimate.hpp"
#include "mpiaccel/model_family.hpp"

namespace mpiaccel {

ModelFootprint model_footprint(const std::string& kind, const ModelSpec& spec, int64_t tp) {
  const ModelFamily& family = model_family(kind);
  MPIACCEL_CHECK(tp >= 1, "estimate-memory: tp_size must be at least 1");
  MPIACCEL_CHECK(tp == 1 || family.tensor_parallel,
                 "estimate-memory: tensor parallelism does not split a " + kind + " (its family has no plan for it)");
  ModelFootprint out = family.footprint(spec, tp);
  out.kind = kind;
  return out;
}

ModelFootprint count_footprint(Model& model, const std::vector<std::string>& unit_classes) {
  ModelFootprint out;
  out.kind = model.kind();
  std::unordered_set<const void*> in_units, all;
  // Outermost matching modules only: a unit inside a unit belongs to the outer.
  std::vector<std::shared_ptr<torch::nn::Module>> pending = model.module().children();
  while (!pending.empty()) {
    std::shared_ptr<torch::nn::Module> m = pending.back();
    pending.pop_back();
    if (std::find(unit_classes.begin(), unit_classes.end(), m->name()) == unit_classes.end()) {
      for (const auto& child : m->children()) pending.push_back(child);
      continue;
    }
    int64_t count = 0;
    for (const at::Tensor& p : m->parameters(/*recurse=*/true))
      if (in_units.insert(p.unsafeGetTensorImpl()).second) count += p.numel();
    out.largest_unit_params = std::max(out.largest_unit_params, count);
    ++out.units;
  }
  for (const at::Tensor& p : model.module().parameters(/*recurse=*/true)) {
    if (!all.insert(p.unsafeGetTensorImpl()).second) continue;
    out.params += p.numel();
    const int64_t rows = p.dim() == 0 ? 1 : p.size(0);
    out.tensors.push_back({rows, rows == 0 ? 0 : p.numel() / rows});
    if (!in_units.count(p.unsafeGetTensorImpl())) out.root_params += p.numel();
  }
  return out;
}

int64_t activation_bytes(const std::string& kind, const ModelSpec& spec, int64_t batch, int64_t element_bytes,
                         bool checkpointing, int64_t tp, bool sequence_parallel) {
  MPIACCEL_CHECK(batch >= 1 && (element_bytes == 2 || element_bytes == 4),
                 "activation_bytes: batch must be positive and element_bytes 2 or 4");
  return model_family(kind).activation_bytes(spec, batch, element_bytes, checkpointing, tp, sequence_parallel);
}

}  // namespace mpiaccel
