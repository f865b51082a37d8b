#pragma once
// The Accelerator's device mesh: built from [parallelism] (and [fsdp]
// HYBRID_SHARD, its older spelling), and the data-parallel shape the strategy
// is resolved for.

#include <memory>

#include "mpiaccel/comm.hpp"
#include "mpiaccel/config.hpp"
#include "mpiaccel/mesh.hpp"
#include "mpiaccel/runtime.hpp"

namespace mpiaccel::detail {

/// The job's mesh over `world`. Collective over `world`.
std::unique_ptr<Mesh> make_mesh(const Config& config, const Runtime& runtime,
                                std::shared_ptr<Communicator> world);

/// The mesh's data-parallel ranks as resolve_strategy places a strategy on
/// them: dp_replicate replicas of dp_shard × cp ranks that shard together
/// (consecutive in the mesh's data-parallel group).
DataParallelShape data_parallel_shape(const MeshShape& shape);

}  // namespace mpiaccel::detail
