#include "comm/mpi_communicator.hpp"
#include "comm/peer_work.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <numeric>

#include "comm/hierarchical_all_reduce.hpp"
#include "comm/mpi_handle.hpp"
#include "comm/mpi_types.hpp"
#include "comm/shm_block.hpp"
#include "comm/shm_region.hpp"
#include "mpiaccel/log.hpp"
#include "comm/tensor_checks.hpp"
#include "runtime/check_mpi.hpp"
#include "runtime/runtime_mpi.hpp"

namespace mpiaccel::detail {
namespace {

// MPI counts are int: larger all_reduce/broadcast/bytes transfers go in chunks.
constexpr int64_t kMaxChunk = int64_t{1} << 30;

void check_int_count(int64_t count, const char* op, const char* what) {
  MPIACCEL_CHECK(count <= INT_MAX,
                 std::string(op) + ": " + what + " is " + std::to_string(count) +
                     " elements, more than MPI's int count (2^31-1) allows; split it into "
                     "several calls");
}

template <typename Collective>
void chunked(char* data, int64_t count, int64_t element_bytes, Collective&& collective) {
  for (int64_t done = 0; done < count; done += kMaxChunk) {
    const int chunk = static_cast<int>(std::min(kMaxChunk, count - done));
    collective(data + done * element_bytes, chunk);
  }
}

// all_gather's input may already sit in its block of the output (FSDP-style
// flat buffers); MPI then needs MPI_IN_PLACE instead of aliased buffers.
bool is_own_block(const at::Tensor& output, const at::Tensor& input, int64_t offset) {
  return input.numel() > 0 &&
         static_cast<const char*>(input.data_ptr()) ==
             static_cast<const char*>(output.data_ptr()) + offset * output.element_size();
}

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm, std::chrono::milliseconds timeout)
    : comm_(comm) {
  MPIACCEL_CHECK(timeout.count() > 0, "communicator timeout must be positive, got " +
                                          std::to_string(timeout.count()) + " ms");
  MPIACCEL_CHECK_MPI(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  MPIACCEL_CHECK_MPI(MPI_Comm_rank(comm_, &rank_));
  MPIACCEL_CHECK_MPI(MPI_Comm_size(comm_, &size_));
  init_mpi_types();
  thread_ = std::make_unique<CommThread>(rank_, size_, timeout);
}

std::shared_ptr<MpiCommunicator> MpiCommunicator::duplicate(MPI_Comm base,
                                                            std::chrono::milliseconds timeout) {
  MPIACCEL_CHECK(base != MPI_COMM_NULL, "cannot build a communicator: the MPI communicator is "
                                        "null (was the Runtime destroyed?)");
  MPI_Comm comm = MPI_COMM_NULL;
  MPIACCEL_CHECK_MPI(MPI_Comm_dup(base, &comm));  // collective over base
  return std::make_shared<MpiCommunicator>(comm, timeout);
}

MpiCommunicator::~MpiCommunicator() {
  thread_.reset();
  topology_.reset();  // its communicators, before this one
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

WorkHandle MpiCommunicator::all_reduce_async(at::Tensor tensor, ReduceOp op) {
  check_tensor(tensor, "all_reduce", "tensor", false, "MPI");
  check_reduce_op(op, tensor.scalar_type(), "all_reduce");
  if (auto region = region_of(tensor); region && ShmRegion::supports(tensor.scalar_type(), op))
    return thread_->enqueue("all_reduce", describe_op("all_reduce", tensor),
                            [region, tensor, op] { region->all_reduce(tensor, op); });
  const MPI_Datatype type = mpi_datatype(tensor.scalar_type());
  const MPI_Op mpi_op = mpi_reduce_op(op, tensor.scalar_type());
  return thread_->enqueue(
      "all_reduce", describe_op("all_reduce", tensor),
      [this, comm = comm_, size = size_, tensor, type, mpi_op, op] {
        const NodeTopology* hierarchy = hierarchy_for(tensor);
        chunked(static_cast<char*>(tensor.data_ptr()), tensor.numel(), tensor.element_size(),
                [&](char* data, int count) {
                  if (hierarchy)
                    hierarchy->all_reduce(data, count, tensor.element_size(), type, mpi_op);
                  else
                    MPIACCEL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, data, count, type, mpi_op, comm));
                });
        if (op == ReduceOp::Avg && size > 1) tensor.div_(size);
      });
}

const NodeTopology* MpiCommunicator::hierarchy_for(const at::Tensor& tensor) {
  if (size_ < 2 || tensor.numel() * tensor.element_size() < kHierarchicalMinBytes) return nullptr;
  std::lock_guard<std::mutex> lock(topology_mutex_);
  if (!topology_checked_) {
    // Inside the first large collective's own task (an all-reduce,
    // reduce-scatter or all-gather): the same op, at the same place in every
    // rank's queue, so the ranks decide together (and a deadline names it).
    topology_checked_ = true;
    topology_ = NodeTopology::create(comm_);
    if (topology_ && rank_ == 0) log_debug("collectives across nodes: " + topology_->describe());
  }
  return topology_.get();
}

bool MpiCommunicator::hierarchical() const {
  std::lock_guard<std::mutex> lock(topology_mutex_);
  return topology_ && topology_->hierarchical();
}

WorkHandle MpiCommunicator::reduce_scatter_async(at::Tensor output, at::Tensor input,
                                                 ReduceOp op) {
  const char* name = "reduce_scatter";
  check_tensor(output, name, "output", false, "MPI");
  check_tensor(input, name, "input", false, "MPI");
  check_same_dtype(output, input, name);
  check_reduce_op(op, input.scalar_type(), name);
  check_numel(input, output.numel() * size_, name, "input", "size() x output elements");
  check_int_count(output.numel(), name, "the output");
  const MPI_Datatype type = mpi_datatype(input.scalar_type());
  const MPI_Op mpi_op = mpi_reduce_op(op, input.scalar_type());
  return thread_->enqueue(
      name, describe_op(name, input),
      [this, comm = comm_, size = size_, output, input, type, mpi_op, op] {
        const NodeTopology* topology = hierarchy_for(input);
        if (topology && topology->takes_halves(input.numel() * input.element_size(), input.numel()))
          topology->reduce_scatter(input.data_ptr(), output.data_ptr(), output.numel(), input.element_size(), type,
                                   mpi_op);
        else
          MPIACCEL_CHECK_MPI(MPI_Reduce_scatter_block(input.data_ptr(), output.data_ptr(),
                                                      static_cast<int>(output.numel()), type, mpi_op, comm));
        if (op == ReduceOp::Avg && size > 1) output.div_(size);
      });
}

WorkHandle MpiCommunicator::all_gather_async(at::Tensor output, at::Tensor input) {
  const char* name = "all_gather";
  check_tensor(output, name, "output", false, "MPI");
  check_tensor(input, name, "input", false, "MPI");
  check_same_dtype(output, input, name);
  check_numel(output, input.numel() * size_, name, "output", "size() x input elements");
  check_int_count(input.numel(), name, "the input");
  const MPI_Datatype type = mpi_datatype(input.scalar_type());
  const bool in_place = is_own_block(output, input, input.numel() * rank_);
  return thread_->enqueue(name, describe_op(name, output), [this, comm = comm_, output, input, type, in_place] {
    const NodeTopology* topology = hierarchy_for(output);
    if (topology && topology->takes_halves(output.numel() * output.element_size(), output.numel())) {
      topology->all_gather(input.data_ptr(), output.data_ptr(), input.numel(), input.element_size(), type);
      return;
    }
    const int count = static_cast<int>(input.numel());
    MPIACCEL_CHECK_MPI(MPI_Allgather(in_place ? MPI_IN_PLACE : input.data_ptr(), count, type, output.data_ptr(),
                                     count, type, comm));
  });
}

WorkHandle MpiCommunicator::all_gather_uneven_async(at::Tensor output, at::Tensor input,
                                                    std::vector<int64_t> counts) {
  const char* name = "all_gather_uneven";
  check_tensor(output, name, "output", false, "MPI");
  check_tensor(input, name, "input", false, "MPI");
  check_same_dtype(output, input, name);
  const int64_t total = check_uneven_counts(counts, size_, rank_, output, input);
  check_int_count(total, name, "the output");
  std::vector<int> int_counts(counts.begin(), counts.end());
  std::vector<int> displacements(counts.size(), 0);
  std::partial_sum(int_counts.begin(), int_counts.end() - 1, displacements.begin() + 1);
  const MPI_Datatype type = mpi_datatype(input.scalar_type());
  const bool in_place = is_own_block(output, input, displacements[static_cast<size_t>(rank_)]);
  return thread_->enqueue(
      name, describe_op(name, output),
      [comm = comm_, output, input, type, in_place, int_counts = std::move(int_counts),
       displacements = std::move(displacements)] {
        MPIACCEL_CHECK_MPI(MPI_Allgatherv(in_place ? MPI_IN_PLACE : input.data_ptr(),
                                          static_cast<int>(input.numel()), type,
                                          output.data_ptr(), int_counts.data(),
                                          displacements.data(), type, comm));
      });
}

WorkHandle MpiCommunicator::all_to_all_async(at::Tensor output, at::Tensor input) {
  const char* name = "all_to_all";
  check_tensor(output, name, "output", false, "MPI");
  check_tensor(input, name, "input", false, "MPI");
  check_same_dtype(output, input, name);
  check_numel(output, input.numel(), name, "output", "the input's elements");
  MPIACCEL_CHECK(input.numel() % size_ == 0, std::string(name) + ": " + std::to_string(input.numel()) +
                                                  " elements do not divide into " + std::to_string(size_) +
                                                  " blocks, one per rank");
  check_int_count(input.numel() / size_, name, "a block");
  const MPI_Datatype type = mpi_datatype(input.scalar_type());
  return thread_->enqueue(name, describe_op(name, input), [comm = comm_, size = size_, output, input, type] {
    const int block = static_cast<int>(input.numel() / size);
    MPIACCEL_CHECK_MPI(MPI_Alltoall(input.data_ptr(), block, type, output.data_ptr(), block, type, comm));
  });
}

WorkHandle MpiCommunicator::broadcast_async(at::Tensor tensor, int root) {
  check_tensor(tensor, "broadcast", "tensor", false, "MPI");
  check_root(root, size_, "broadcast");
  const MPI_Datatype type = mpi_datatype(tensor.scalar_type());
  return thread_->enqueue(
      "broadcast", describe_op("broadcast", tensor), [comm = comm_, tensor, type, root] {
        chunked(static_cast<char*>(tensor.data_ptr()), tensor.numel(), tensor.element_size(),
                [&](char* data, int count) {
                  MPIACCEL_CHECK_MPI(MPI_Bcast(data, count, type, root, comm));
                });
      });
}

WorkHandle MpiCommunicator::barrier_async() {
  return thread_->enqueue("barrier", "barrier",
                          [comm = comm_] { MPIACCEL_CHECK_MPI(MPI_Barrier(comm)); });
}

namespace {
void check_peer(int peer, int size, const char* op) {
  MPIACCEL_CHECK(peer >= 0 && peer < size, std::string(op) + ": peer " + std::to_string(peer) +
                                               " is not a rank of this communicator of " + std::to_string(size));
}
}  // namespace

WorkHandle MpiCommunicator::send_async(at::Tensor tensor, int peer, int tag, const std::string& what) {
  check_tensor(tensor, "send", "tensor", false, "MPI");
  check_peer(peer, size_, "send");
  return std::make_shared<PeerWork>(PeerWork::Direction::Send, std::move(tensor), peer, tag, comm_, rank_,
                                    timeout(), what);
}

WorkHandle MpiCommunicator::recv_async(at::Tensor tensor, int peer, int tag, const std::string& what) {
  check_tensor(tensor, "recv", "tensor", false, "MPI");
  check_peer(peer, size_, "recv");
  return std::make_shared<PeerWork>(PeerWork::Direction::Recv, std::move(tensor), peer, tag, comm_, rank_,
                                    timeout(), what);
}

std::string MpiCommunicator::broadcast_bytes(const std::string& bytes, int root) {
  check_root(root, size_, "broadcast_bytes");
  std::string result;
  thread_->run("broadcast_bytes", "broadcast_bytes of " + std::to_string(bytes.size()) +
                                      " bytes (on the root)",
               [&, comm = comm_] {
                 int64_t length = rank_ == root ? static_cast<int64_t>(bytes.size()) : 0;
                 MPIACCEL_CHECK_MPI(MPI_Bcast(&length, 1, MPI_INT64_T, root, comm));
                 result = rank_ == root ? bytes : std::string(static_cast<size_t>(length), '\0');
                 chunked(result.data(), length, 1, [&](char* data, int count) {
                   MPIACCEL_CHECK_MPI(MPI_Bcast(data, count, MPI_BYTE, root, comm));
                 });
               });
  return result;
}

namespace {

// Every rank's byte count, all-gathered (not gathered) so that every rank can
// agree on the INT_MAX check before the data moves; then the counts and
// displacements of the byte collective. Runs on the communication thread.
struct ByteLayout {
  std::vector<int> counts;
  std::vector<int> displacements;
  int64_t total = 0;
};

ByteLayout byte_layout(MPI_Comm comm, size_t my_bytes, int size, const char* op) {
  int64_t length = static_cast<int64_t>(my_bytes);
  std::vector<int64_t> lengths(static_cast<size_t>(size));
  MPIACCEL_CHECK_MPI(MPI_Allgather(&length, 1, MPI_INT64_T, lengths.data(), 1, MPI_INT64_T, comm));
  ByteLayout layout;
  layout.total = std::accumulate(lengths.begin(), lengths.end(), int64_t{0});
  check_int_count(layout.total, op, "the total");
  layout.counts.assign(lengths.begin(), lengths.end());
  layout.displacements.assign(layout.counts.size(), 0);
  std::partial_sum(layout.counts.begin(), layout.counts.end() - 1, layout.displacements.begin() + 1);
  return layout;
}

}  // namespace

std::vector<std::string> MpiCommunicator::all_gather_bytes(const std::string& bytes) {
  std::vector<std::string> result;
  thread_->run(
      "all_gather_bytes", "all_gather_bytes of " + std::to_string(bytes.size()) + " bytes",
      [&, comm = comm_] {
        const ByteLayout layout = byte_layout(comm, bytes.size(), size_, "all_gather_bytes");
        const auto& counts = layout.counts;
        const auto& displacements = layout.displacements;
        const int64_t total = layout.total;
        std::string all(static_cast<size_t>(total), '\0');
        MPIACCEL_CHECK_MPI(MPI_Allgatherv(bytes.data(), counts[static_cast<size_t>(rank_)],
                                          MPI_BYTE, all.data(), counts.data(),
                                          displacements.data(), MPI_BYTE, comm));
        for (size_t r = 0; r < counts.size(); ++r)
          result.push_back(all.substr(static_cast<size_t>(displacements[r]),
                                      static_cast<size_t>(counts[r])));
      });
  return result;
}

std::vector<std::string> MpiCommunicator::gather_bytes(const std::string& bytes, int root) {
  check_root(root, size_, "gather_bytes");
  std::vector<std::string> result;
  thread_->run(
      "gather_bytes", "gather_bytes of " + std::to_string(bytes.size()) + " bytes",
      [&, comm = comm_] {
        // All-gather of the lengths (not a gather) so that every rank can
        // agree on the size check below before the data moves.
        const ByteLayout layout = byte_layout(comm, bytes.size(), size_, "gather_bytes");
        const auto& counts = layout.counts;
        const auto& displacements = layout.displacements;
        const int64_t total = layout.total;
        std::string all(rank_ == root ? static_cast<size_t>(total) : 0, '\0');
        MPIACCEL_CHECK_MPI(MPI_Gatherv(bytes.data(), counts[static_cast<size_t>(rank_)], MPI_BYTE,
                                       all.data(), counts.data(), displacements.data(), MPI_BYTE,
                                       root, comm));
        if (rank_ != root) return;
        for (size_t r = 0; r < counts.size(); ++r)
          result.push_back(all.substr(static_cast<size_t>(displacements[r]),
                                      static_cast<size_t>(counts[r])));
      });
  return result;
}

std::shared_ptr<Communicator> MpiCommunicator::split(int color, int key) {
  MPI_Comm part = MPI_COMM_NULL;
  thread_->run("split", "split", [&, comm = comm_] {
    MPIACCEL_CHECK_MPI(MPI_Comm_split(comm, color < 0 ? MPI_UNDEFINED : color, key, &part));
  });
  if (part == MPI_COMM_NULL) return nullptr;
  return std::make_shared<MpiCommunicator>(part, thread_->timeout());
}

std::shared_ptr<Communicator> MpiCommunicator::split_by_node() {
  MPI_Comm node = MPI_COMM_NULL;
  thread_->run("split_type", "split_by_node", [&, comm = comm_] {
    MPIACCEL_CHECK_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  });
  return std::make_shared<MpiCommunicator>(node, thread_->timeout());
}

bool MpiCommunicator::all_on_one_node() {
  if (!all_on_one_node_) {
    int node_size = 0;
    thread_->run("split_type", "split_type", [&, comm = comm_] {
      MPI_Comm node = MPI_COMM_NULL;
      MPIACCEL_CHECK_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
      MPIACCEL_CHECK_MPI(MPI_Comm_size(node, &node_size));
      MPIACCEL_CHECK_MPI(MPI_Comm_free(&node));
    });
    all_on_one_node_ = node_size == size_;
  }
  return *all_on_one_node_;
}

at::Tensor MpiCommunicator::allocate_shared(int64_t bytes) {
  const char* setting = std::getenv("MPIACCEL_SHM_ALLREDUCE");
  if (size_ < 2 || (setting && std::strcmp(setting, "0") == 0) || !all_on_one_node()) return {};
  std::string why;
  auto region = ShmRegion::create(rank_, size_, bytes, shm_setup_collectives(), &why);
  if (!region) {
    if (!why.empty())
      log_warn("rank " + std::to_string(rank_) + ": no shared memory for in-place all-reduce (" +
               why + "); using MPI messages instead. Give the job a larger /dev/shm, or set "
               "MPIACCEL_SHM_ALLREDUCE=0 to silence this");
    return {};
  }
  std::lock_guard<std::mutex> lock(regions_mutex_);
  regions_.erase(std::remove_if(regions_.begin(), regions_.end(),
                                [](const std::weak_ptr<ShmRegion>& r) { return r.expired(); }),
                 regions_.end());
  regions_.push_back(region);
  return region->tensor(region);
}

at::Tensor MpiCommunicator::allocate_node_shared(int64_t bytes) {
  if (size_ < 2 || !all_on_one_node()) return {};
  std::string why;
  auto block = ShmBlock::create(rank_, bytes, shm_setup_collectives(), &why);
  if (!block) {
    if (!why.empty())
      log_warn("rank " + std::to_string(rank_) + ": no node-shared memory (" + why +
               "); every rank keeps its own copy instead. Give the job a larger /dev/shm");
    return {};
  }
  return block->tensor(block);
}

ShmSetupCollectives MpiCommunicator::shm_setup_collectives() {
  return {[this](const std::string& text) { return broadcast_bytes(text, 0); },
          [this](bool ok) { return all_reduce_int(ok ? 1 : 0, ReduceOp::Min) == 1; }};
}

std::shared_ptr<ShmRegion> MpiCommunicator::region_of(const at::Tensor& tensor) {
  std::lock_guard<std::mutex> lock(regions_mutex_);
  for (const auto& weak : regions_)
    if (auto region = weak.lock(); region && region->contains(tensor)) return region;
  return nullptr;
}

MPI_Comm mpi_comm_of(const Communicator& comm) {
  if (const auto* mpi = dynamic_cast<const MpiCommunicator*>(&comm)) return mpi->handle();
  const auto* backed = dynamic_cast<const HostBacked*>(&comm);
  MPIACCEL_CHECK(backed, "the " + name_of(comm.backend()) + " communicator has no MPI communicator "
                         "under it; pass an MPI or NCCL one");
  return mpi_comm_of(backed->host());
}

}  // namespace mpiaccel::detail

namespace mpiaccel {

std::shared_ptr<Communicator> make_mpi_world(const Runtime& runtime,
                                             std::chrono::milliseconds timeout) {
  return detail::MpiCommunicator::duplicate(detail::RuntimeAccess::world(runtime), timeout);
}

std::shared_ptr<Communicator> make_mpi_node(const Runtime& runtime,
                                            std::chrono::milliseconds timeout) {
  return detail::MpiCommunicator::duplicate(detail::RuntimeAccess::node(runtime), timeout);
}

}  // namespace mpiaccel
