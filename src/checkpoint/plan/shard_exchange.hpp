#pragma once
// The shard records a load needs, without any rank reading the whole table.
// In a file with /meta/shard_index (the table sorted by tensor), the tensors
// are split in blocks over the ranks: the owner of a block reads its tensors'
// rows of /meta/shards (one independent read) and checks that each tensor's
// shards tile its rows. Every rank sends the owners the row range each of its
// targets loads; each owner answers with the saved shards covering that
// range (all of them for a tensor loaded whole). Two all-to-alls; per rank
// O(tensors / ranks × saved ranks + the shards covering its own rows),
// instead of every rank receiving the whole table (tensors × saved ranks).

#include <hdf5.h>
#include <mpi.h>

#include "checkpoint/manifest/manifest.hpp"
#include "mpiaccel/checkpoint.hpp"
#include "mpiaccel/comm.hpp"

namespace mpiaccel::detail {

/// Fills info.tensors[t].shards with the saved shards covering the rows this
/// rank's `targets` load (the targets are already checked against `info`).
/// `file` is the checkpoint opened over `world`. Collective over world and
/// comm (the same ranks); throws on every rank alike.
void fetch_covering_shards(MPI_Comm world, Communicator& comm, hid_t file, CheckpointInfo& info,
                           const ShardIndex& index, const ShardedStateDict& targets);

}  // namespace mpiaccel::detail
