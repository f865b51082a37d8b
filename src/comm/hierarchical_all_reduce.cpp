// The hierarchical all-reduce (see hierarchical_all_reduce.hpp).

#include "comm/hierarchical_all_reduce.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "runtime/check_mpi.hpp"

namespace mpiaccel::detail {

std::unique_ptr<NodeTopology> NodeTopology::create(MPI_Comm comm) {
  const char* setting = std::getenv("MPIACCEL_HIERARCHICAL_ALLREDUCE");
  const bool allowed = !(setting && std::strcmp(setting, "0") == 0);
  int rank = 0, size = 1;
  MPIACCEL_CHECK_MPI(MPI_Comm_rank(comm, &rank));
  MPIACCEL_CHECK_MPI(MPI_Comm_size(comm, &size));
  std::unique_ptr<NodeTopology> topology(new NodeTopology());
  MPIACCEL_CHECK_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &topology->node_));
  MPIACCEL_CHECK_MPI(MPI_Comm_rank(topology->node_, &topology->local_rank_));
  MPIACCEL_CHECK_MPI(MPI_Comm_size(topology->node_, &topology->local_size_));
  // Every rank decides alike: the same counts everywhere, more than one node,
  // more than one rank per node, and nobody switched it off.
  int sizes[3] = {topology->local_size_, -topology->local_size_, allowed ? 1 : 0};
  MPIACCEL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, sizes, 3, MPI_INT, MPI_MIN, comm));
  const bool even = sizes[0] == -sizes[1];
  if (!even || sizes[2] == 0 || topology->local_size_ == 1 || topology->local_size_ == size)
    return nullptr;  // the destructor frees node_
  topology->nodes_ = size / topology->local_size_;
  MPIACCEL_CHECK_MPI(MPI_Comm_split(comm, topology->local_rank_, rank, &topology->cross_));
  return topology;
}

NodeTopology::~NodeTopology() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (cross_ != MPI_COMM_NULL) MPI_Comm_free(&cross_);
  if (node_ != MPI_COMM_NULL) MPI_Comm_free(&node_);
}

void NodeTopology::all_reduce(void* data, int64_t count, int64_t element_bytes, MPI_Datatype type,
                              MPI_Op op) const {
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
  MPIACCEL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, slice.data(), mine, type, op, cross_));
  MPIACCEL_CHECK_MPI(MPI_Allgatherv(slice.data(), mine, type, data, counts.data(),
                                    displacements.data(), type, node_));
}

}  // namespace mpiaccel::detail
