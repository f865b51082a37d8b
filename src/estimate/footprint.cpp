// The bundled models' footprints, counted from a shape-only build of the
// family (make_model_shapes: every parameter's name and shape, no values)
// with each parameter held as the family's tensor-parallel plan splits it,
// and their activations from the family's closed form
// (include/mpiaccel/model_family.hpp).

#include <torch/nn/module.h>

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "mpiaccel/error.hpp"
#include "mpiaccel/estimate.hpp"
#include "mpiaccel/model_family.hpp"

namespace mpiaccel {
namespace {

// How one rank holds a parameter: its rows and row width.
using HeldRows = std::function<ParamRows(const std::string& name, const at::Tensor& param)>;

ParamRows whole_rows(const at::Tensor& p) {
  const int64_t rows = p.dim() == 0 ? 1 : p.size(0);
  return {rows, rows == 0 ? 0 : p.numel() / rows};
}

// `p` as one of `tp` ranks holds it when split `how` (docs/parallelism.md).
ParamRows split_rows(const at::Tensor& p, TensorSplit how, int64_t tp) {
  const ParamRows whole = whole_rows(p);
  switch (how) {
    case TensorSplit::Rows: return {whole.rows / tp, whole.row_numel};
    case TensorSplit::Columns: return {whole.rows, whole.row_numel / tp};
    case TensorSplit::Fused3: return {3, p.numel() / 3 / tp};
    case TensorSplit::Whole: break;
  }
  return whole;
}

// The footprint of `model` with each parameter held as `held` says: units
// are the outermost modules whose Module::name() is one of `unit_classes`.
ModelFootprint count_held(Model& model, const std::vector<std::string>& unit_classes, const HeldRows& held) {
  ModelFootprint out;
  out.kind = model.kind();
  std::unordered_map<const void*, int64_t> elements;  // per parameter, as held
  for (const auto& item : model.module().named_parameters(/*recurse=*/true)) {
    const void* impl = item.value().unsafeGetTensorImpl();
    if (elements.count(impl)) continue;  // a tied parameter, once
    const ParamRows rows = held(item.key(), item.value());
    elements[impl] = rows.rows * rows.row_numel;
    out.params += elements[impl];
    out.tensors.push_back(rows);
  }
  std::unordered_set<const void*> in_units;
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
      if (in_units.insert(p.unsafeGetTensorImpl()).second) count += elements[p.unsafeGetTensorImpl()];
    out.largest_unit_params = std::max(out.largest_unit_params, count);
    ++out.units;
  }
  out.root_params = out.params;
  for (const void* impl : in_units) out.root_params -= elements[impl];
  return out;
}

}  // namespace

ModelFootprint model_footprint(const std::string& kind, const ModelSpec& spec, int64_t tp) {
  const ModelFamily& family = model_family(kind);
  MPIACCEL_CHECK(tp >= 1, "estimate-memory: tp_size must be at least 1");
  MPIACCEL_CHECK(tp == 1 || family.tensor_split != nullptr,
                 "estimate-memory: tensor parallelism does not split a " + kind + " (its family has no plan for it)");
  if (tp > 1) family.check_tensor_parallel(spec, tp);
  std::shared_ptr<Model> shapes = make_model_shapes(kind, spec);
  return count_held(*shapes, family.unit_classes, [&](const std::string& name, const at::Tensor& p) {
    return tp == 1 ? whole_rows(p) : split_rows(p, family.tensor_split(name, spec, tp), tp);
  });
}

ModelFootprint count_footprint(Model& model, const std::vector<std::string>& unit_classes) {
  return count_held(model, unit_classes, [](const std::string&, const at::Tensor& p) { return whole_rows(p); });
}

int64_t activation_bytes(const std::string& kind, const ModelSpec& spec, int64_t batch, int64_t element_bytes,
                         bool checkpointing, int64_t tp, bool sequence_parallel) {
  MPIACCEL_CHECK(batch >= 1 && (element_bytes == 2 || element_bytes == 4),
                 "activation_bytes: batch must be positive and element_bytes 2 or 4");
  return model_family(kind).activation_bytes(spec, batch, element_bytes, checkpointing, tp, sequence_parallel);
}

}  // namespace mpiaccel
