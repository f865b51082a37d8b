#pragma once
// Internal: the MPI communicator (CPU tensors). See comm_thread.hpp for how
// its ops run and how the deadline is enforced.

#include <mpi.h>

#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "comm/comm_thread.hpp"
#include "comm/hierarchical_all_reduce.hpp"
#include "comm/shm_segment.hpp"
#include "mpiaccel/comm.hpp"

namespace mpiaccel::detail {

class ShmRegion;

class MpiCommunicator final : public Communicator {
 public:
  /// Takes ownership of `comm` (frees it on destruction).
  MpiCommunicator(MPI_Comm comm, std::chrono::milliseconds timeout);
  /// A communicator over a duplicate of `base` (collective over `base`).
  static std::shared_ptr<MpiCommunicator> duplicate(MPI_Comm base,
                                                    std::chrono::milliseconds timeout);
  /// Drains the queue, joins the thread, frees the MPI_Comm. Never throws.
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Backend backend() const override { return Backend::Mpi; }
  /// The MPI communicator its operations run on (comm/mpi_handle.hpp).
  MPI_Comm handle() const { return comm_; }
  std::chrono::milliseconds timeout() const override { return thread_->timeout(); }

  WorkHandle all_reduce_async(at::Tensor tensor, ReduceOp op) override;
  WorkHandle reduce_scatter_async(at::Tensor output, at::Tensor input, ReduceOp op) override;
  WorkHandle all_gather_async(at::Tensor output, at::Tensor input) override;
  WorkHandle all_gather_uneven_async(at::Tensor output, at::Tensor input,
                                     std::vector<int64_t> counts) override;
  WorkHandle all_to_all_async(at::Tensor output, at::Tensor input) override;
  WorkHandle broadcast_async(at::Tensor tensor, int root) override;
  WorkHandle barrier_async() override;
  WorkHandle send_async(at::Tensor tensor, int peer, int tag, const std::string& what) override;
  WorkHandle recv_async(at::Tensor tensor, int peer, int tag, const std::string& what) override;

  std::string broadcast_bytes(const std::string& bytes, int root) override;
  std::vector<std::string> all_gather_bytes(const std::string& bytes) override;
  std::vector<std::string> gather_bytes(const std::string& bytes, int root) override;

  /// A negative `color` joins no group and returns nullptr (MPI_UNDEFINED).
  std::shared_ptr<Communicator> split(int color, int key) override;

  at::Tensor allocate_shared(int64_t bytes) override;
  at::Tensor allocate_node_shared(int64_t bytes) override;
  std::shared_ptr<Communicator> split_by_node() override;

  /// Whether large all-reduces run hierarchically (ranks on several nodes,
  /// the same number on each; decided at the first one of 64 KiB or more).
  bool hierarchical() const;

 private:
  /// The ranks' spread over nodes, for a collective of `tensor` (an
  /// all-reduce, or a reduce-scatter's input, an all-gather's output), or
  /// nullptr: one node, or too small to matter. Runs in the collective's task
  /// (the first large one decides, collectively: every rank's queue holds the
  /// same collectives in the same order).
  const NodeTopology* hierarchy_for(const at::Tensor& tensor);
  /// The live shared region `tensor` lies in, or nullptr.
  std::shared_ptr<ShmRegion> region_of(const at::Tensor& tensor);
  /// Whether every rank runs on this node (asked once; collective then).
  bool all_on_one_node();
  /// The collective steps of a shared segment's set-up, over this communicator.
  ShmSetupCollectives shm_setup_collectives();

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  std::unique_ptr<CommThread> thread_;
  std::optional<bool> all_on_one_node_;
  std::mutex regions_mutex_;
  std::vector<std::weak_ptr<ShmRegion>> regions_;
  mutable std::mutex topology_mutex_;
  bool topology_checked_ = false;
  std::unique_ptr<NodeTopology> topology_;
};

}  // namespace mpiaccel::detail
