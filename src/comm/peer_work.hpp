#pragma once
// Internal: a point-to-point message of the MPI communicator
// (Communicator::send_async / recv_async). The MPI_Isend or MPI_Irecv is
// posted on the calling thread, outside the communication thread's queue:
// messages between two ranks must not wait behind collectives, and sends and
// receives in both directions must be in flight together (pipeline stages
// exchange activations one way and gradients the other). wait() tests the
// request until it completes, yielding the core, and aborts the job with
// fatal() when the deadline passes, naming what the message was.

#include <mpi.h>

#include <chrono>
#include <mutex>
#include <string>

#include <ATen/core/Tensor.h>

#include "mpiaccel/comm.hpp"

namespace mpiaccel::detail {

class PeerWork final : public Work {
 public:
  enum class Direction { Send, Recv };
  /// Posts the message of `tensor` (contiguous, on the host) to or from
  /// `peer` of `comm`.
  PeerWork(Direction direction, at::Tensor tensor, int peer, int tag, MPI_Comm comm, int rank,
           std::chrono::milliseconds timeout, std::string what);
  ~PeerWork() override;

  /// Tests the request (an MPI call: it also progresses the message).
  bool test() override;
  void wait() override;
  const std::string& name() const override { return name_; }
  std::chrono::steady_clock::time_point started_at() const override { return started_; }
  std::chrono::steady_clock::time_point finished_at() const override { return finished_; }

 private:
  [[noreturn]] void overran() const;

  std::string name_;
  at::Tensor tensor_;  // kept alive while MPI uses its memory
  int peer_, tag_, rank_;
  std::chrono::milliseconds timeout_;
  std::string what_;
  std::mutex mutex_;
  MPI_Request request_ = MPI_REQUEST_NULL;
  bool done_ = false;
  std::chrono::steady_clock::time_point started_, finished_{};
};

}  // namespace mpiaccel::detail
