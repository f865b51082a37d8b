#pragma once
// Internal: the hierarchical all-reduce of an MPI communicator whose ranks
// span several nodes (Horovod's; NCCL does the equivalent inside itself):
//   1. reduce-scatter within the node (shared memory: Open MPI's vader),
//      so each of the node's L ranks holds the node's sum of 1/L of the data;
//   2. all-reduce of that slice across the nodes, among the ranks at the
//      same place in their node (one slice per rank on the network: the
//      node sends its data once, not L times);
//   3. all-gather within the node.
// It needs the same number of ranks on every node; one rank per node is
// the flat all-reduce already, and so is one node.

#include <mpi.h>

#include <cstdint>
#include <memory>

namespace mpiaccel::detail {

/// The two sub-communicators of a hierarchical all-reduce. Owns them.
class NodeTopology {
 public:
  /// Over `comm`: nullptr on every rank alike when a hierarchy does not
  /// apply (one node, one rank per node, or nodes with different rank
  /// counts), or when MPIACCEL_HIERARCHICAL_ALLREDUCE=0. Collective over comm.
  static std::unique_ptr<NodeTopology> create(MPI_Comm comm);
  ~NodeTopology();
  NodeTopology(const NodeTopology&) = delete;
  NodeTopology& operator=(const NodeTopology&) = delete;

  /// In place over `count` elements of `data`, on the calling thread.
  /// Collective over the communicator it was made from.
  void all_reduce(void* data, int64_t count, int64_t element_bytes, MPI_Datatype type,
                  MPI_Op op) const;

  int local_size() const { return local_size_; }
  int nodes() const { return nodes_; }

 private:
  NodeTopology() = default;

  MPI_Comm node_ = MPI_COMM_NULL;   // this node's ranks
  MPI_Comm cross_ = MPI_COMM_NULL;  // one rank per node, at this rank's place in it
  int local_rank_ = 0, local_size_ = 1, nodes_ = 1;
};

/// Tensors smaller than this go flat: three latency-bound calls instead of
/// one would cost more than the bytes they save.
constexpr int64_t kHierarchicalMinBytes = int64_t{64} << 10;

}  // namespace mpiaccel::detail
