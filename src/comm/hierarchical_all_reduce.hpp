#pragma once
// Internal: the all-reduce of an MPI communicator whose ranks span several
// nodes (docs/comm.md, "Across nodes"). With the same number L > 1 of ranks
// on every node, hierarchical (Horovod's; NCCL does the equivalent inside
// itself):
//   1. reduce-scatter within the node (shared memory: Open MPI's vader),
//      so each of the node's L ranks holds the node's sum of 1/L of the data;
//   2. all-reduce of that slice across the nodes, among the ranks at the
//      same place in their node (one slice per rank on the network: the
//      node sends its data once, not L times);
//   3. all-gather within the node.
// Otherwise (one rank per node, uneven nodes, or the hierarchy switched off)
// step 2 alone, over every rank. Step 2 is the pipelined ring
// (ring_all_reduce.hpp) for large slices where every link of the ring
// crosses nodes (across a hierarchy's nodes, or one rank per node), else
// MPI_Allreduce.

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>

namespace mpiaccel::detail {

/// Tensors smaller than this go flat: three latency-bound calls instead of
/// one would cost more than the bytes they save.
constexpr int64_t kHierarchicalMinBytes = int64_t{64} << 10;
/// Slices smaller than this cross the nodes by MPI_Allreduce: the ring's
/// 2(p − 1) latency-bound steps would cost more than its pipelining saves.
constexpr int64_t kRingMinBytes = int64_t{1} << 20;

/// The sub-communicators of an all-reduce across nodes. Owns them.
class NodeTopology {
 public:
  /// Over `comm`: nullptr on every rank alike when its ranks share one node.
  /// Hierarchical unless MPIACCEL_HIERARCHICAL_ALLREDUCE=0 or the nodes hold
  /// one rank or different numbers; the ring unless MPIACCEL_RING_ALLREDUCE=0.
  /// Collective over comm.
  static std::unique_ptr<NodeTopology> create(MPI_Comm comm);
  ~NodeTopology();
  NodeTopology(const NodeTopology&) = delete;
  NodeTopology& operator=(const NodeTopology&) = delete;

  /// In place over `count` elements of `data`, on the calling thread.
  /// Collective over the communicator it was made from.
  void all_reduce(void* data, int64_t count, int64_t element_bytes, MPI_Datatype type,
                  MPI_Op op) const;

  bool hierarchical() const { return hierarchical_; }
  bool ring() const { return ring_; }
  /// Whether a reduce-scatter or all-gather of `bytes` over the whole
  /// communicator goes around the ring (one rank per node): then over
  /// ring_comm(), which nothing else uses.
  bool rings_whole(int64_t bytes) const { return ring_ && !hierarchical_ && bytes >= kRingMinBytes; }
  MPI_Comm ring_comm() const { return cross_; }
  int local_size() const { return local_size_; }
  /// For the log: "hierarchical over 2 nodes x 2 ranks, ring across".
  std::string describe() const;

 private:
  NodeTopology() = default;
  /// Step 2, over cross_.
  void all_reduce_across(void* data, int64_t count, int64_t element_bytes, MPI_Datatype type, MPI_Op op) const;

  MPI_Comm node_ = MPI_COMM_NULL;   // this node's ranks
  MPI_Comm cross_ = MPI_COMM_NULL;  // hierarchical: one rank per node, at this rank's place; else every rank
  bool hierarchical_ = false, ring_ = true;
  int local_rank_ = 0, local_size_ = 1, size_ = 1;
};


}  // namespace mpiaccel::detail
