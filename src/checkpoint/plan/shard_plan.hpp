#pragma once
// Where every rank's shard records go in /meta/shards, decided without
// gathering them: the table is sorted by tensor (in the save's tensor order)
// and, within a tensor, by rank, so a record's row is the tensor's base (the
// records of all earlier tensors) plus the records of the same tensor on
// lower ranks. One exclusive scan and one all-reduce of O(tensors) integers
// per rank, whatever the world size.
//
// The same all-reduce checks that every tensor's rows are saved exactly
// once. Rows [b, e) are an edge b -> e; the rows tile [0, R) exactly when
// the multiset of begins plus {R} equals the multiset of ends plus {0}
// (forward edges with that balance form one path from 0 to R). Each rank adds
// a 40-bit hash of its begins and of its ends per tensor; the sums are
// compared. Only when they differ are the records gathered on rank 0, to
// name the rows held twice or by nobody.

#include <mpi.h>

#include <cstdint>
#include <vector>

#include "checkpoint/manifest/manifest.hpp"
#include "mpiaccel/comm.hpp"

namespace mpiaccel::detail {

struct LocalShard;  // save_writer.hpp

struct ShardTablePlan {
  std::vector<int64_t> positions;  ///< table row of each of this rank's records
  std::vector<int64_t> counts;     ///< records per tensor, in tensor order (every rank)
  size_t total = 0;                ///< table rows
};

/// `records[i]` is this rank's record of tensor `tensor_of[i]` (an index into
/// `shards`, increasing). Collective over comm and `world` (the same ranks).
/// Throws, on every rank alike, naming the first tensor whose rows are held
/// twice or by no rank.
ShardTablePlan plan_shard_table(MPI_Comm world, Communicator& comm,
                                const std::vector<LocalShard>& shards,
                                const std::vector<ShardRecord>& records,
                                const std::vector<size_t>& tensor_of);

}  // namespace mpiaccel::detail
