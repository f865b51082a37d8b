// The hierarchical all-reduce (see hierarchical_all_reduce.hpp).

#include "comm/hierarchical_all_reduce.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
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

std::unique_ptr<NodeTopology> NodeTopology::create(MPI_Comm comm, int node_color) {
  int rank = 0, size = 1;
  MPIACCEL_CHECK_MPI(MPI_Comm_rank(comm, &rank));
  MPIACCEL_CHECK_MPI(MPI_Comm_size(comm, &size));
  std::unique_ptr<NodeTopology> topology(new NodeTopology());
  topology->size_ = size;
  if (node_color < 0)
    MPIACCEL_CHECK_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &topology->node_));
  else
    MPIACCEL_CHECK_MPI(MPI_Comm_split(comm, node_color, rank, &topology->node_));
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
    MPIACCEL_CHECK_MPI(MPI_Comm_split(comm, topology->local_rank_, topology->place_blocks(comm), &topology->cross_));
  else
    MPIACCEL_CHECK_MPI(MPI_Comm_dup(comm, &topology->cross_));
  return topology;
}

int NodeTopology::place_blocks(MPI_Comm comm) {
  // Nodes are numbered in the order of their first ranks, alike on every rank.
  int rank = 0;
  MPIACCEL_CHECK_MPI(MPI_Comm_rank(comm, &rank));
  int mine[2] = {rank, local_rank_};
  MPIACCEL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &mine[0], 1, MPI_INT, MPI_MIN, node_));
  std::vector<int> all(2 * static_cast<size_t>(size_));
  MPIACCEL_CHECK_MPI(MPI_Allgather(mine, 2, MPI_INT, all.data(), 2, MPI_INT, comm));
  std::vector<int> firsts;
  for (int r = 0; r < size_; ++r) firsts.push_back(all[2 * static_cast<size_t>(r)]);
  std::sort(firsts.begin(), firsts.end());
  firsts.erase(std::unique(firsts.begin(), firsts.end()), firsts.end());
  const auto node_of = [&](int r) {
    const int first = all[2 * static_cast<size_t>(r)];
    return static_cast<int>(std::lower_bound(firsts.begin(), firsts.end(), first) - firsts.begin());
  };
  const int64_t nodes = static_cast<int64_t>(firsts.size());
  place_order_.resize(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r)
    place_order_[static_cast<size_t>(r)] = all[2 * static_cast<size_t>(r) + 1] * nodes + node_of(r);
  return node_of(rank);
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
  const auto slice_bytes = static_cast<size_t>(std::max(mine, 1)) * static_cast<size_t>(element_bytes);
  const std::unique_ptr<char[]> slice(new char[slice_bytes]);
  MPIACCEL_CHECK_MPI(MPI_Reduce_scatter(data, slice.get(), counts.data(), type, op, node_));
  all_reduce_across(slice.get(), mine, element_bytes, type, op);
  MPIACCEL_CHECK_MPI(MPI_Allgatherv(slice.get(), mine, type, data, counts.data(),
                                    displacements.data(), type, node_));
}

bool NodeTopology::takes_halves(int64_t bytes, int64_t elements) const {
  if (hierarchical_) return elements <= INT_MAX;  // one MPI count within the node
  return ring_ && bytes >= kRingMinBytes;
}

void NodeTopology::reduce_scatter(const void* input, void* output, int64_t block, int64_t element_bytes,
                                  MPI_Datatype type, MPI_Op op) const {
  if (!hierarchical_) {
    ring_reduce_scatter(input, output, block, element_bytes, type, op, cross_, kRingSegmentBytes);
    return;
  }
  if (block == 0) return;
  const int64_t nodes = size_ / local_size_, bytes = block * element_bytes;
  // Scratch the copies overwrite whole: not zero-filled first.
  const std::unique_ptr<char[]> grouped(new char[static_cast<size_t>(size_ * bytes)]);
  const std::unique_ptr<char[]> node_sum(new char[static_cast<size_t>(nodes * bytes)]);
  for (int r = 0; r < size_; ++r)
    std::memcpy(grouped.get() + place_order_[static_cast<size_t>(r)] * bytes,
                static_cast<const char*>(input) + r * bytes, static_cast<size_t>(bytes));
  MPIACCEL_CHECK_MPI(
      MPI_Reduce_scatter_block(grouped.get(), node_sum.get(), static_cast<int>(nodes * block), type, op, node_));
  if (ring_ && nodes * bytes >= kRingMinBytes)
    ring_reduce_scatter_in_place(node_sum.get(), output, block, element_bytes, type, op, cross_, kRingSegmentBytes);
  else
    MPIACCEL_CHECK_MPI(MPI_Reduce_scatter_block(node_sum.get(), output, static_cast<int>(block), type, op, cross_));
}

void NodeTopology::all_gather(const void* input, void* output, int64_t block, int64_t element_bytes,
                              MPI_Datatype type) const {
  if (!hierarchical_) {
    ring_all_gather(input, output, block, element_bytes, type, cross_, kRingSegmentBytes);
    return;
  }
  if (block == 0) return;
  const int64_t nodes = size_ / local_size_, bytes = block * element_bytes;
  const std::unique_ptr<char[]> across(new char[static_cast<size_t>(nodes * bytes)]);
  const std::unique_ptr<char[]> grouped(new char[static_cast<size_t>(size_ * bytes)]);
  if (ring_ && nodes * bytes >= kRingMinBytes)
    ring_all_gather(input, across.get(), block, element_bytes, type, cross_, kRingSegmentBytes);
  else
    MPIACCEL_CHECK_MPI(MPI_Allgather(input, static_cast<int>(block), type, across.get(), static_cast<int>(block),
                                     type, cross_));
  MPIACCEL_CHECK_MPI(MPI_Allgather(across.get(), static_cast<int>(nodes * block), type, grouped.get(),
                                   static_cast<int>(nodes * block), type, node_));
  for (int r = 0; r < size_; ++r)
    std::memcpy(static_cast<char*>(output) + r * bytes,
                grouped.get() + place_order_[static_cast<size_t>(r)] * bytes, static_cast<size_t>(bytes));
}

}  // namespace mpiaccel::detail
