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
//
// Reduce-scatters and all-gathers (FSDP's, ZeRO's) take the same two levels.
// The reduce-scatter: the blocks are regrouped by the place their rank holds
// in its node; a reduce-scatter within the node gives each rank the node's
// sum of the blocks of its place on every node; a reduce-scatter across the
// nodes (the ring for large ones) leaves it its own block. Each node sends
// its data once, not once per rank. The all-gather runs the same backwards.

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

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
  /// `node_color` < 0: nodes are shared-memory domains; else the ranks of
  /// one color form a node (tests of several nodes on one host).
  /// Collective over comm.
  static std::unique_ptr<NodeTopology> create(MPI_Comm comm, int node_color = -1);
  ~NodeTopology();
  NodeTopology(const NodeTopology&) = delete;
  NodeTopology& operator=(const NodeTopology&) = delete;

  /// In place over `count` elements of `data`, on the calling thread.
  /// Collective over the communicator it was made from.
  void all_reduce(void* data, int64_t count, int64_t element_bytes, MPI_Datatype type,
                  MPI_Op op) const;

  bool hierarchical() const { return hierarchical_; }
  /// Whether reduce_scatter and all_gather below take a whole buffer of
  /// `bytes` in `elements`: the ring over every rank, or the two levels.
  bool takes_halves(int64_t bytes, int64_t elements) const;
  /// MPI_Reduce_scatter_block's contract (`input`: size · block elements).
  void reduce_scatter(const void* input, void* output, int64_t block, int64_t element_bytes, MPI_Datatype type,
                      MPI_Op op) const;
  /// MPI_Allgather's contract; `input` may be the own block of `output`.
  void all_gather(const void* input, void* output, int64_t block, int64_t element_bytes, MPI_Datatype type) const;
  int local_size() const { return local_size_; }
  /// For the log: "hierarchical over 2 nodes x 2 ranks, ring across".
  std::string describe() const;

 private:
  NodeTopology() = default;
  /// Hierarchical: numbers the nodes, fills place_order_, returns this
  /// rank's node. Collective over `comm`.
  int place_blocks(MPI_Comm comm);
  /// Step 2, over cross_.
  void all_reduce_across(void* data, int64_t count, int64_t element_bytes, MPI_Datatype type, MPI_Op op) const;

  /// Hierarchical: where each rank's block sits when the blocks are grouped
  /// by place in the node, then by node (the order the node's reduce-scatter
  /// hands out: place p gets the blocks p·nodes .. p·nodes + nodes − 1).
  std::vector<int64_t> place_order_;

  MPI_Comm node_ = MPI_COMM_NULL;   // this node's ranks
  MPI_Comm cross_ = MPI_COMM_NULL;  // hierarchical: one rank per node, at this rank's place, in node order; else every rank
  bool hierarchical_ = false, ring_ = true;
  int local_rank_ = 0, local_size_ = 1, size_ = 1;
};


}  // namespace mpiaccel::detail
