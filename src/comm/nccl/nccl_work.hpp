#pragma once
// An issued NCCL op and what it shares with its communicator: the NCCL
// communicator, its deadline and its abort (NcclState); the op's events,
// completion, device times and deadline check (NcclWork); and the anchor that
// puts device times on the host's clock (ClockAnchor). The ordering and
// deadline rules they implement: nccl_communicator.cpp.

#include <ATen/core/Tensor.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "mpiaccel/comm.hpp"

namespace mpiaccel::detail {

using NcclClock = std::chrono::steady_clock;

// What the communicator, its works and its watcher share.
struct NcclState {
  ncclComm_t comm = nullptr;
  int rank = 0, size = 1, device = 0;
  std::chrono::milliseconds timeout{0};
  std::atomic<bool> aborting{false};

  std::string where() const;
  /// ncclCommAbort (once), then fatal(): a kernel some peer never joined
  /// cannot be cancelled.
  [[noreturn]] void abort(const std::string& why);
  /// Aborts: `what` did not complete within the timeout.
  [[noreturn]] void overran(const std::string& what);
  /// Aborts if NCCL reports an error: an error inside an issued collective
  /// cannot be agreed on with the peers.
  void check_async(const std::string& what);
  /// After a call returned ncclInProgress, NCCL wants the state polled until
  /// it settles before the next call on this communicator; under the deadline.
  void settle(ncclResult_t result, const std::string& what);
};

// A timing event and the host time at which the device reached it.
struct ClockAnchor {
  cudaEvent_t event = nullptr;
  NcclClock::time_point host;

  explicit ClockAnchor(cudaStream_t idle_stream);
  ~ClockAnchor();
  ClockAnchor(const ClockAnchor&) = delete;
  ClockAnchor& operator=(const ClockAnchor&) = delete;

  /// `later` must have completed.
  NcclClock::time_point host_time_of(cudaEvent_t later) const;
};

class NcclWork final : public Work {
 public:
  NcclWork(std::shared_ptr<NcclState> state, std::string name, std::string description,
           std::vector<at::Tensor> tensors, std::shared_ptr<ClockAnchor> anchor, bool host_waits);
  ~NcclWork() override;

  /// The op's stream waits for what the caller queued so far on its own.
  void order_after(cudaStream_t compute, cudaStream_t nccl);
  /// Records the completion event after the NCCL calls on `nccl`.
  void issued_on(cudaStream_t nccl);

  bool test() override;
  void wait() override;
  /// Aborts the job when the op is past its deadline or NCCL reports an error.
  void check_overrun();

  const std::string& name() const override { return name_; }
  NcclClock::time_point started_at() const override;
  NcclClock::time_point finished_at() const override;

 private:
  std::shared_ptr<NcclState> state_;
  std::string name_, description_;
  std::mutex mutex_;
  std::vector<at::Tensor> tensors_;
  std::shared_ptr<ClockAnchor> anchor_;
  const bool host_waits_;
  const NcclClock::time_point issued_;
  cudaEvent_t ready_ = nullptr, start_ = nullptr, done_ = nullptr;
  bool done_flag_ = false;
  std::atomic<NcclClock::rep> started_{0}, finished_{0};
};

}  // namespace mpiaccel::detail
