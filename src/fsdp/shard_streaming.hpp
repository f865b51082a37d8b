#pragma once
// Memory-efficient init ([fsdp] cpu_ram_efficient_loading, docs/fsdp.md):
// when ranks >= 1 built the model deferred (parameters without memory,
// ModelInit::deferred), rank 0 streams each unit's shards to them, one block
// at a time, instead of broadcasting the whole model.

#include "fsdp/unit_builder.hpp"

namespace torch::nn {
class Module;
}

namespace mpiaccel {
class Communicator;
}

namespace mpiaccel::detail {

/// Whether some rank's `model` has a parameter or buffer without memory, so
/// prepare must stream. Throws mpiaccel::Error on every rank if rank 0 is one
/// of them: rank 0's values are the ones sent.
/// Collective over comm: every rank calls it, in the same order.
bool agree_streamed_init(Communicator& comm, const torch::nn::Module& model);

/// Rank 0's buffers and frozen parameters (what FSDP does not shard) into
/// every rank's `model`, giving memory to those that have none.
/// Collective over comm: every rank calls it, in the same order.
void broadcast_unsharded_state(Communicator& comm, torch::nn::Module& model);

/// Fills every rank's shards of `built` (built from rank 0's full
/// parameters there, from nothing elsewhere) with rank 0's rows: unit by
/// unit, rank 0 packs the unit's flat layout and broadcasts it block by
/// block; each rank keeps the block of its index in the shard group
/// (`shard_index`), so besides its shards it holds one block at a time (rank
/// 0: one packed unit). Then the root unit's full parameters get rank 0's
/// values (they live gathered), and every other unit's full parameters are
/// freed on every rank, rank 0 included: those units start sharded and the
/// first forward gathers them. Collective over `comm` (the strategy's world:
/// with HYBRID_SHARD every replica group is fed too): every rank calls it, in
/// the same order.
void stream_shards(Communicator& comm, int shard_index, BuiltUnits& built);

}  // namespace mpiaccel::detail
