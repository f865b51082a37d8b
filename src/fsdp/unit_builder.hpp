#pragma once
// Turns a wrap plan into FSDP units and sharded parameters (internal).

#include <utility>
#include <vector>

#include "fsdp/fsdp_unit.hpp"
#include "fsdp/wrap_policy.hpp"

namespace torch::nn {
class Module;
}

namespace mpiaccel::detail {

struct BuiltUnits {
  std::vector<FsdpUnit> units;   ///< [0] is the root
  std::vector<FsdpParam> params;
};

/// Assigns every trainable parameter of `model` to the innermost planned unit
/// holding it (a parameter shared by units that do not nest goes to the root),
/// lays each unit out over `parts` ranks and copies this rank's (`index`)
/// rows into fresh shard tensors (leaves that require grad). Frozen
/// parameters are not sharded. Throws mpiaccel::Error for parameters FSDP
/// cannot shard (sharing storage, mixed dtypes or devices in one unit).
/// With `offload`, the shards (hence gradients and optimizer state) live on
/// the CPU whatever the parameters' device.
/// A parameter whose storage holds no memory (built deferred) is accepted;
/// its shard rows stay zero until stream_shards() (shard_streaming.hpp)
/// fills them.
BuiltUnits build_units(torch::nn::Module& model, const std::vector<PlannedUnit>& plan, int parts,
                       int index, bool offload = false);

}  // namespace mpiaccel::detail
