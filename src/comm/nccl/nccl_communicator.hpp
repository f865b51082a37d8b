#pragma once
// The NCCL communicator (nccl_communicator.cpp: bootstrap, split, the
// watcher; nccl_ops.cpp: the op issue path).

#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "comm/mpi_handle.hpp"
#include "comm/nccl/nccl_work.hpp"
#include "mpiaccel/comm.hpp"

namespace mpiaccel::detail {

class NcclCommunicator final : public Communicator, public HostBacked {
 public:
  NcclCommunicator(Communicator& bootstrap, int cuda_index, std::chrono::milliseconds timeout);
  ~NcclCommunicator() override;

  int rank() const override { return state_->rank; }
  int size() const override { return state_->size; }
  Backend backend() const override { return Backend::Nccl; }
  std::chrono::milliseconds timeout() const override { return state_->timeout; }

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

  // Host bytes travel over MPI (our own split of the bootstrap communicator).
  std::string broadcast_bytes(const std::string& bytes, int root) override {
    return host_->broadcast_bytes(bytes, root);
  }
  std::vector<std::string> all_gather_bytes(const std::string& bytes) override {
    return host_->all_gather_bytes(bytes);
  }
  std::vector<std::string> gather_bytes(const std::string& bytes, int root) override {
    return host_->gather_bytes(bytes, root);
  }
  const Communicator& host() const override { return *host_; }
  /// An NCCL communicator (with its own stream) over the ranks passing the
  /// same color, bootstrapped over the matching split of the host one.
  std::shared_ptr<Communicator> split(int color, int key) override {
    return std::make_shared<NcclCommunicator>(*host_->split(color, key), state_->device,
                                              state_->timeout);
  }
  std::shared_ptr<Communicator> split_by_node() override {
    return std::make_shared<NcclCommunicator>(*host_->split_by_node(), state_->device,
                                              state_->timeout);
  }

 private:
  void check(const at::Tensor& tensor, const char* op, const char* argument) const;
  /// Host tensors (a loss to average, a count) travel over the host MPI
  /// communicator; CUDA ones over NCCL; a mix is an error.
  static bool on_host(std::initializer_list<at::Tensor> tensors);
  // Puts `issue` (the NCCL calls) on the stream under one lock, so calls from
  // several threads reach NCCL whole and in one order.
  WorkHandle launch(const char* name, std::string description, std::vector<at::Tensor> tensors,
                    const std::function<ncclResult_t()>& issue, bool host_waits = false);
  std::shared_ptr<ClockAnchor> anchor();
  void watch();

  std::shared_ptr<Communicator> host_;
  std::shared_ptr<NcclState> state_;
  std::optional<c10::cuda::CUDAStream> stream_;
  cudaStream_t anchor_stream_ = nullptr;  // idle: an event there completes at once
  std::shared_ptr<ClockAnchor> anchor_;
  at::Tensor barrier_word_;
  std::mutex mutex_;
  std::condition_variable watch_cv_;
  std::vector<std::shared_ptr<NcclWork>> pending_;
  bool stop_ = false;
  std::thread watcher_;
};

}  // namespace mpiaccel::detail
