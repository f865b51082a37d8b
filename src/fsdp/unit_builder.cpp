// Units and shards from a wrap plan (see unit_builder.hpp).

#include "fsdp/unit_builder.hpp"

#include <ATen/core/grad_mode.h>
#include <ATen/ATen.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <torch/nn/module.h>

#include <unordered_map>
#include <unordered_set>

#include "fsdp/param_storage.hpp"
#include "mpiaccel/error.hpp"
#include "runtime/device_streams.hpp"

namespace mpiaccel::detail {
namespace {

// The unit of every parameter: the innermost planned unit holding it, if the
// units holding it nest (pre-order puts inner units after outer ones).
std::unordered_map<const void*, size_t> assign(const std::vector<PlannedUnit>& plan) {
  std::unordered_map<const void*, std::vector<size_t>> holders;
  for (size_t k = 0; k < plan.size(); ++k) {
    std::unordered_set<const void*> seen;
    for (const auto& p : plan[k].module->parameters(/*recurse=*/true))
      if (seen.insert(p.unsafeGetTensorImpl()).second) holders[p.unsafeGetTensorImpl()].push_back(k);
  }
  std::unordered_map<const void*, size_t> unit_of;
  for (const auto& [impl, units] : holders) {
    const size_t inner = units.back();
    bool nested = true;
    for (size_t k : units) {
      if (k == inner) continue;
      bool contains = false;
      for (const auto& m : plan[k].module->modules(/*include_self=*/false))
        contains = contains || m.get() == plan[inner].module;
      nested = nested && contains;
    }
    unit_of[impl] = nested ? inner + 1 : 0;  // unit 0 is the root
  }
  return unit_of;
}

// One unit per planned unit, after the root (unit 0).
std::vector<FsdpUnit> empty_units(torch::nn::Module& model, const std::vector<PlannedUnit>& plan) {
  std::vector<FsdpUnit> units(plan.size() + 1);
  units[0].cls = model.name();
  for (size_t k = 0; k < plan.size(); ++k) {
    FsdpUnit& u = units[k + 1];
    u.name = plan[k].name;
    u.cls = plan[k].module->name();
    u.module = plan[k].module;
  }
  for (size_t k = 0; k < units.size(); ++k) units[k].index = k;
  return units;
}

// Every trainable parameter (once, however often it is shared), in its unit.
void add_params(torch::nn::Module& model, const std::vector<PlannedUnit>& plan, BuiltUnits& built) {
  const auto unit_of = assign(plan);
  std::unordered_set<const void*> seen;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    const at::Tensor& p = item.value();
    if (!p.requires_grad() || !seen.insert(p.unsafeGetTensorImpl()).second) continue;
    // An empty storage (a deferred build, docs/fsdp.md) is refilled whole later.
    const bool empty = !storage_allocated(p) && p.is_contiguous() && p.storage_offset() == 0;
    MPIACCEL_CHECK(owns_whole_storage(p) || empty,
                   "FSDP: parameter " + item.key() +
                       " shares its storage with other tensors (a view or a slice of a bigger "
                       "tensor); FSDP frees and refills each parameter's storage, so every "
                       "parameter must own a contiguous storage of its own");
    FsdpParam param;
    param.name = item.key();
    param.full = p;
    auto it = unit_of.find(p.unsafeGetTensorImpl());
    param.unit = it == unit_of.end() ? 0 : it->second;
    FsdpUnit& u = built.units[param.unit];
    if (!u.params.empty()) {
      const at::Tensor& first = built.params[u.params.front()].full;
      MPIACCEL_CHECK(first.scalar_type() == p.scalar_type() && first.device() == p.device(),
                     "FSDP: unit " + u.display_name() + " mixes parameters of different dtypes "
                     "or devices (" + built.params[u.params.front()].name + " and " + item.key() +
                     "); one unit is gathered as one flat buffer: cast the model to one dtype "
                     "and device before prepare");
    }
    param.slot = u.params.size();
    u.params.push_back(built.params.size());
    built.params.push_back(std::move(param));
  }
  MPIACCEL_CHECK(!built.params.empty(), "FSDP: the model has no parameter that requires grad");
}

// Lays `u` out over `parts` ranks and gives each of its parameters this
// rank's (`index`) rows as a shard: a leaf view of the unit's flat `local`.
void shard_unit(FsdpUnit& u, std::vector<FsdpParam>& params, int parts, int index, bool offload) {
  std::vector<std::vector<int64_t>> shapes;
  for (size_t p : u.params) {
    shapes.push_back(params[p].full.sizes().vec());
    u.full_bytes += params[p].full.numel() * params[p].full.element_size();
  }
  u.layout = FlatLayout(shapes, parts, index);
  u.full_options = u.params.empty()
                       ? at::TensorOptions(at::kFloat)
                       : params[u.params.front()].full.options().requires_grad(false);
  // With cpu_offload the shards live on the host, pinned when the full
  // parameters are on a GPU: each gather copies them up asynchronously.
  u.local = offload ? staging_empty({u.layout.block()}, u.full_options.dtype().toScalarType(),
                                    u.full_options.device()).zero_()
                    : at::zeros({u.layout.block()}, u.full_options);
  for (size_t s = 0; s < u.params.size(); ++s) {
    FsdpParam& param = params[u.params[s]];
    const FlatSlot& slot = u.layout.slots()[s];
    at::Tensor shard;
    {
      // A plain alias of `local` (not an autograd view): a leaf the
      // optimizer can own and update in place.
      at::AutoDispatchBelowADInplaceOrView plain_views;
      shard = u.layout.shard_view(u.local, s);
    }
    at::NoGradGuard no_grad;
    // A parameter without memory (deferred) gets its rows streamed later.
    if (storage_allocated(param.full)) {
      const at::Tensor rows = param.full.dim() == 0 ? param.full.reshape({1}) : param.full;
      shard.copy_(rows.narrow(0, slot.local.begin, slot.local.count));  // (to the host with offload)
    }
    shard.set_requires_grad(true);
    param.shard = shard;
  }
}

}  // namespace

BuiltUnits build_units(torch::nn::Module& model, const std::vector<PlannedUnit>& plan, int parts,
                       int index, bool offload) {
  BuiltUnits built;
  built.units = empty_units(model, plan);
  add_params(model, plan, built);
  for (FsdpUnit& u : built.units) shard_unit(u, built.params, parts, index, offload);
  return built;
}

}  // namespace mpiaccel::detail
