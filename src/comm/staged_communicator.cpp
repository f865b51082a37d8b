// MPI with device↔host staging (see staged_communicator.hpp).

#include "comm/staged_communicator.hpp"

#include <ATen/ATen.h>

#include <mutex>
#include <utility>
#include <vector>

#include "mpiaccel/error.hpp"
#include "runtime/device_streams.hpp"

namespace mpiaccel::detail {
namespace {

bool on_device(const at::Tensor& t) { return t.defined() && !t.device().is_cpu(); }

// A host copy of `t`'s values (t itself when it is on the host). Blocks the
// host until the device has produced them.
at::Tensor staged_copy(const at::Tensor& t) {
  if (!on_device(t)) return t;
  at::Tensor host = staging_empty(t.sizes(), t.scalar_type(), t.device());
  host.copy_(t);
  return host;
}

// Host memory for a device output (the output itself when it is on the host).
at::Tensor staged_output(const at::Tensor& t) {
  return on_device(t) ? staging_empty(t.sizes(), t.scalar_type(), t.device()) : t;
}

// A device tensor and the host tensor the MPI op wrote its result into.
using Landing = std::pair<at::Tensor, at::Tensor>;

class StagedWork final : public Work {
 public:
  StagedWork(WorkHandle inner, std::vector<Landing> landings)
      : inner_(std::move(inner)), landings_(std::move(landings)) {}

  bool test() override { return inner_->test(); }
  void wait() override {
    inner_->wait();
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [device, host] : landings_) device.copy_(host, /*non_blocking=*/true);
    landings_.clear();
  }
  const std::string& name() const override { return inner_->name(); }
  std::chrono::steady_clock::time_point started_at() const override { return inner_->started_at(); }
  std::chrono::steady_clock::time_point finished_at() const override { return inner_->finished_at(); }

 private:
  WorkHandle inner_;
  std::mutex mutex_;
  std::vector<Landing> landings_;
};

class StagedCommunicator final : public Communicator, public HostBacked {
 public:
  explicit StagedCommunicator(std::shared_ptr<Communicator> mpi) : mpi_(std::move(mpi)) {
    MPIACCEL_CHECK(mpi_ && mpi_->backend() == Backend::Mpi,
                   "host staging needs an MPI communicator underneath");
  }

  int rank() const override { return mpi_->rank(); }
  int size() const override { return mpi_->size(); }
  Backend backend() const override { return Backend::Mpi; }
  std::chrono::milliseconds timeout() const override { return mpi_->timeout(); }
  const Communicator& host() const override { return *mpi_; }

  WorkHandle all_reduce_async(at::Tensor tensor, ReduceOp op) override {
    at::Tensor host = staged_copy(tensor);
    return landed(mpi_->all_reduce_async(host, op), {{tensor, host}});
  }
  WorkHandle reduce_scatter_async(at::Tensor output, at::Tensor input, ReduceOp op) override {
    at::Tensor host_out = staged_output(output);
    return landed(mpi_->reduce_scatter_async(host_out, staged_copy(input), op), {{output, host_out}});
  }
  WorkHandle all_gather_async(at::Tensor output, at::Tensor input) override {
    at::Tensor host_out = staged_output(output);
    return landed(mpi_->all_gather_async(host_out, staged_copy(input)), {{output, host_out}});
  }
  WorkHandle all_gather_uneven_async(at::Tensor output, at::Tensor input,
                                     std::vector<int64_t> counts) override {
    at::Tensor host_out = staged_output(output);
    return landed(mpi_->all_gather_uneven_async(host_out, staged_copy(input), std::move(counts)),
                  {{output, host_out}});
  }
  WorkHandle all_to_all_async(at::Tensor output, at::Tensor input) override {
    at::Tensor host_out = staged_output(output);
    return landed(mpi_->all_to_all_async(host_out, staged_copy(input)), {{output, host_out}});
  }
  WorkHandle broadcast_async(at::Tensor tensor, int root) override {
    at::Tensor host = staged_copy(tensor);
    return landed(mpi_->broadcast_async(host, root), {{tensor, host}});
  }
  WorkHandle barrier_async() override { return mpi_->barrier_async(); }
  WorkHandle send_async(at::Tensor tensor, int peer, int tag, const std::string& what) override {
    return mpi_->send_async(staged_copy(tensor), peer, tag, what);
  }
  WorkHandle recv_async(at::Tensor tensor, int peer, int tag, const std::string& what) override {
    at::Tensor host = staged_output(tensor);
    return landed(mpi_->recv_async(host, peer, tag, what), {{tensor, host}});
  }

  std::string broadcast_bytes(const std::string& bytes, int root) override {
    return mpi_->broadcast_bytes(bytes, root);
  }
  std::vector<std::string> all_gather_bytes(const std::string& bytes) override {
    return mpi_->all_gather_bytes(bytes);
  }
  std::vector<std::string> gather_bytes(const std::string& bytes, int root) override {
    return mpi_->gather_bytes(bytes, root);
  }
  std::shared_ptr<Communicator> split(int color, int key) override {
    auto part = mpi_->split(color, key);
    return part ? make_staged(std::move(part)) : nullptr;
  }
  std::shared_ptr<Communicator> split_by_node() override { return make_staged(mpi_->split_by_node()); }
  // Host memory the ranks share serves host tensors only.
  at::Tensor allocate_shared(int64_t bytes) override { return mpi_->allocate_shared(bytes); }
  at::Tensor allocate_node_shared(int64_t bytes) override {
    return mpi_->allocate_node_shared(bytes);
  }

 private:
  // The op's Work, copying results back to the device on wait() where any
  // output was staged.
  static WorkHandle landed(WorkHandle work, std::vector<Landing> landings) {
    std::vector<Landing> staged;
    for (Landing& l : landings)
      if (on_device(l.first)) staged.push_back(std::move(l));
    if (staged.empty()) return work;
    return std::make_shared<StagedWork>(std::move(work), std::move(staged));
  }

  std::shared_ptr<Communicator> mpi_;
};

}  // namespace

std::shared_ptr<Communicator> make_staged(std::shared_ptr<Communicator> mpi) {
  return std::make_shared<StagedCommunicator>(std::move(mpi));
}

}  // namespace mpiaccel::detail
