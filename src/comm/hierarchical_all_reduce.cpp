// The hierarchical all-reduce (see hierarchical_all_reduce.hpp).

#include "comm/hierarchical_all_reduce.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "comm/ring_all_reduce.hpp"
#include "runtime/check_mpi.hpp"

namespace mpiaccel::detail {

namespace {

bool switched_off(const char* variable) {
  const char* setting = std::getenv(variable);
  return setting && std::strcmp(setting, "0") == 0;
}

}  // namespace

std::unique_ptr<NodeTopology> NodeTopology::create(MPI_Comm comm) {
  int rank = 0, size = 1;
  MPIACCEL_CHECK_MPI(MPI_Comm_rank(comm, &rank));
  MPIACCEL_CHECK_MPI(MPI_Comm_size(comm, &size));
  std::unique_ptr<NodeTopology> topology(new NodeTopology());
  topology->size_ = size;
  MPIACCEL_CHECK_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &topology->node_));
  MPIACCEL_CHECK_MPI(MPI_Comm_rank(topology->node_, &topology->local_rank_));
  MPIACCEL_CHECK_MPI(MPI_Comm_size(topology->node_, &topology->local_size_));
  // Every rank decides alike, from the minimum over the ranks of: its node's
  // size and its negation (equal nodes), and the two switches.
  int votes[4] = {topology->local_size_, -topology->local_size_, switched_off("MPIACCEL_HIERARCHICAL_ALLREDUCE") ? 0 : 1,
                  switched_off("MPIACCEL_RING_ALLREDUCE") ? 0 : 1};
  MPIACCEL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, votes, 4, MPI_INT, MPI_MIN, comm));
  if (topology->local_size_ == size) return nullptr;  // one node; the destructor frees node_
  const bool even = votes[0] == -votes[1];
  topology->hierarchical_ = even && votes[2] == 1 && topology->local_size_ > 1;
  // The ring pays where each of its links crosses nodes: across the nodes of
  // a hierarchy, or one rank per node. A flat ring over several ranks per
  // node would cross the network more often than Open MPI's algorithms do.
  const bool one_per_node = -votes[1] == 1;
  topology->ring_ = votes[3] == 1 && (topology->hierarchical_ || one_per_node);
  // The ring's messages need a communicator of their own: a duplicate, or
  // the split across nodes, which nothing else uses.
  if (topology->hierarchical_)
    MPIACCEL_CHECK_MPI(MPI_Comm_split(comm, topology->local_rank_, rank, &topology->cross_));
  else
    MPIACCEL_CHECK_MPI(MPI_Comm_dup(comm, &topology->cross_));
  return topology;
}

std::string NodeTopology::describe() const {
  const std::string across = ring_ ? "the pipelined ring across nodes" : "MPI_Allreduce across nodes";
  if (!hierarchical_) return "flat over " + std::to_string(size_) + " ranks on several nodes, " + across;
  return "hierarchical over " + std::to_string(size_ / local_size_) + " nodes x " + std::to_string(local_size_) +
         " ranks, " + across;
}

NodeTopology::~NodeTopology() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (cross_ != MPI_COMM_NULL) MPI_Comm_free(&cross_);
  if (node_ != MPI_COMM_NULL) MPI_Comm_free(&node_);
}

void NodeTopology::all_reduce_across(void* data, int64_t count, int64_t element_bytes, MPI_Datatype type,
                                     MPI_Op op) const {
  if (ring_ && count * element_bytes >= kRingMinBytes)
    ring_all_reduce(data, count, element_bytes, type, op, cross_, kRingSegmentBytes);
  else
    MPIACCEL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count), type, op, cross_));
}

void NodeTopology::all_reduce(void* data, int64_t count, int64_t element_bytes, MPI_Datatype type,
                              MPI_Op op) const {
  if (!hierarchical_) {
    all_reduce_across(data, count, element_bytes, type, op);
    return;
  }
  // Slices of the node's ranks: as even as the count allows, in rank order.
  // MPI counts are int: callers pass at most 2^30 elements at a time.
  std::vector<int> counts(static_cast<size_t>(local_size_)), displacements(counts.size());
  const int64_t base = count / local_size_, extra = count % local_size_;
  int64_t offset = 0;
  for (int r = 0; r < local_size_; ++r) {
    counts[static_cast<size_t>(r)] = static_cast<int>(base + (r < extra ? 1 : 0));
    displacements[static_cast<size_t>(r)] = static_cast<int>(offset);
    offset += counts[static_cast<size_t>(r)];
  }
  const int mine = counts[static_cast<size_t>(local_rank_)];
  std::vector<char> slice(static_cast<size_t>(std::max(mine, 1)) * static_cast<size_t>(element_bytes));
  MPIACCEL_CHECK_MPI(MPI_Reduce_scatter(data, slice.data(), counts.data(), type, op, node_));
  all_reduce_across(slice.data(), mine, element_bytes, type, op);
  MPIACCEL_CHECK_MPI(MPI_Allgatherv(slice.data(), mine, type, data, counts.data(),
                                    displacements.data(), type, node_));
}

}  // namespace mpiaccel::detail
