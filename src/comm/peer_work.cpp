// A point-to-point message of the MPI communicator (see peer_work.hpp).

#include "comm/peer_work.hpp"

#include <sched.h>

#include <climits>
#include <mutex>
#include <utility>
#include <vector>

#include "comm/tensor_checks.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/runtime.hpp"
#include "runtime/activity.hpp"
#include "runtime/check_mpi.hpp"

namespace mpiaccel::detail {

PeerWork::PeerWork(Direction direction, at::Tensor tensor, int peer, int tag, MPI_Comm comm, int rank,
                   std::chrono::milliseconds timeout, std::string what)
    : name_(direction == Direction::Send ? "send" : "recv"),
      tensor_(std::move(tensor)),
      peer_(peer),
      tag_(tag),
      rank_(rank),
      timeout_(timeout),
      what_(std::move(what)),
      started_(std::chrono::steady_clock::now()) {
  const int64_t bytes = tensor_.numel() * static_cast<int64_t>(tensor_.element_size());
  MPIACCEL_CHECK(bytes <= INT_MAX, name_ + " of " + what_ + ": " + std::to_string(bytes) +
                                       " bytes, more than one MPI message carries (2 GiB); use smaller microbatches");
  if (direction == Direction::Send)
    MPIACCEL_CHECK_MPI(MPI_Isend(tensor_.data_ptr(), static_cast<int>(bytes), MPI_BYTE, peer, tag, comm, &request_));
  else
    MPIACCEL_CHECK_MPI(MPI_Irecv(tensor_.data_ptr(), static_cast<int>(bytes), MPI_BYTE, peer, tag, comm, &request_));
}

namespace {

// Unfinished sends' tensors whose handles were dropped (an exception in the
// middle of a step): MPI may still read them, so they live as long as the process.
void keep_for_good(at::Tensor tensor) {
  static std::mutex mutex;
  static auto* kept = new std::vector<at::Tensor>;
  std::lock_guard<std::mutex> lock(mutex);
  kept->push_back(std::move(tensor));
}

}  // namespace

PeerWork::~PeerWork() {
  // A message still in flight uses the tensor's memory. A receive is
  // withdrawn (cancelled, then completed); a send cannot be, so its tensor is
  // kept. A destructor never aborts the job.
  std::lock_guard<std::mutex> lock(mutex_);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (done_ || request_ == MPI_REQUEST_NULL || finalized) return;
  int flag = 0;
  MPI_Test(&request_, &flag, MPI_STATUS_IGNORE);
  if (flag) return;
  if (name_ == "recv") {
    MPI_Cancel(&request_);
    MPI_Wait(&request_, MPI_STATUS_IGNORE);
    return;
  }
  MPI_Request_free(&request_);
  keep_for_good(std::move(tensor_));
}

bool PeerWork::test() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (done_) return true;
  int flag = 0;
  MPIACCEL_CHECK_MPI(MPI_Test(&request_, &flag, MPI_STATUS_IGNORE));
  if (flag) {
    done_ = true;
    finished_ = std::chrono::steady_clock::now();
  }
  return done_;
}

void PeerWork::wait() {
  while (!test()) {
    if (std::chrono::steady_clock::now() - started_ > timeout_) overran();
    sched_yield();
  }
}

void PeerWork::overran() const {
  fatal(name_ + " of " + what_ + " (" + describe_op(name_.c_str(), tensor_) + ", peer rank " + std::to_string(peer_) +
        ", tag " + std::to_string(tag_) + ") on rank " + std::to_string(rank_) + " did not complete within " +
        format_duration(timeout_) +
        ": the peer never posted its side (it failed, is stuck, or runs another schedule), or the network "
        "stalled; if stages are legitimately this slow, raise [distributed] timeout_s (this rank was at: " +
        current_activity() + ")");
}

}  // namespace mpiaccel::detail
