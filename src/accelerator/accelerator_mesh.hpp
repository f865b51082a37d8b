#pragma once
// The Accelerator's device mesh: built from [parallelism] (and [fsdp]
// HYBRID_SHARD, its older spelling), and the config the strategy sees on it.

#include <memory>

#include "mpiaccel/comm.hpp"
#include "mpiaccel/config.hpp"
#include "mpiaccel/mesh.hpp"
#include "mpiaccel/runtime.hpp"

namespace mpiaccel::detail {

/// The job's mesh over `world`. Collective over `world`.
std::unique_ptr<Mesh> make_mesh(const Config& config, const Runtime& runtime,
                                std::shared_ptr<Communicator> world);

/// `config` as the strategy over the mesh's data-parallel group must read
/// it: fsdp with replicas (dp_replicate > 1) is HSDP with groups of dp_shard
/// ranks, which are consecutive in that group.
Config strategy_config(const Config& config, const MeshShape& shape);

}  // namespace mpiaccel::detail
