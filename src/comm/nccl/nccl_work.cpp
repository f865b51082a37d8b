// Issued NCCL ops: see nccl_work.hpp, and the stream and deadline rules at
// the top of nccl_communicator.cpp.

#include "comm/nccl/nccl_work.hpp"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <thread>

#include "comm/tensor_checks.hpp"
#include "mpiaccel/runtime.hpp"
#include "runtime/check_cuda.hpp"

namespace mpiaccel::detail {

std::string NcclState::where() const {
  return "on rank " + std::to_string(rank) + " of " + std::to_string(size) + " (cuda:" +
         std::to_string(device) + ")";
}

void NcclState::abort(const std::string& why) {
  if (!aborting.exchange(true) && comm) ncclCommAbort(comm);
  fatal(why);
}

void NcclState::overran(const std::string& what) {
  abort(what + " " + where() + " did not complete within " + format_duration(timeout) +
        ": a peer never joined (a rank skipped this collective, called a different one, "
        "crashed or is stuck), or the network stalled; if ops are legitimately this slow, "
        "raise [distributed] timeout_s");
}

void NcclState::check_async(const std::string& what) {
  ncclResult_t state = ncclSuccess;
  ncclResult_t result = ncclCommGetAsyncError(comm, &state);
  if (result != ncclSuccess) state = result;
  if (state != ncclSuccess && state != ncclInProgress)
    abort(what + " " + where() + " failed in NCCL: " + ncclGetErrorString(state) + " (" +
          ncclGetLastError(comm) + ")");
}

void NcclState::settle(ncclResult_t result, const std::string& what) {
  if (result != ncclSuccess && result != ncclInProgress)
    abort(what + " " + where() + ": NCCL refused the call: " + ncclGetErrorString(result) +
          " (" + ncclGetLastError(comm) + ")");
  const auto deadline = NcclClock::now() + timeout;
  ncclResult_t state = result;
  while (state == ncclInProgress) {
    if (NcclClock::now() > deadline) overran(what);
    std::this_thread::yield();
    MPIACCEL_CHECK_NCCL(ncclCommGetAsyncError(comm, &state));
  }
  check_async(what);
}

ClockAnchor::ClockAnchor(cudaStream_t idle_stream) {
  MPIACCEL_CHECK_CUDA(cudaEventCreate(&event));
  MPIACCEL_CHECK_CUDA(cudaEventRecord(event, idle_stream));
  MPIACCEL_CHECK_CUDA(cudaEventSynchronize(event));
  host = NcclClock::now();
}

ClockAnchor::~ClockAnchor() { cudaEventDestroy(event); }

NcclClock::time_point ClockAnchor::host_time_of(cudaEvent_t later) const {
  float ms = 0;
  if (cudaEventElapsedTime(&ms, event, later) != cudaSuccess) return host;
  return host + std::chrono::duration_cast<NcclClock::duration>(
                    std::chrono::duration<double, std::milli>(ms));
}

NcclWork::NcclWork(std::shared_ptr<NcclState> state, std::string name, std::string description,
                   std::vector<at::Tensor> tensors, std::shared_ptr<ClockAnchor> anchor,
                   bool host_waits)
    : state_(std::move(state)), name_(std::move(name)), description_(std::move(description)),
      tensors_(std::move(tensors)), anchor_(std::move(anchor)), host_waits_(host_waits),
      issued_(NcclClock::now()) {
  MPIACCEL_CHECK_CUDA(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
  MPIACCEL_CHECK_CUDA(cudaEventCreate(&start_));
  MPIACCEL_CHECK_CUDA(cudaEventCreate(&done_));
}

NcclWork::~NcclWork() {
  cudaEventDestroy(ready_);
  cudaEventDestroy(start_);
  cudaEventDestroy(done_);
}

void NcclWork::order_after(cudaStream_t compute, cudaStream_t nccl) {
  MPIACCEL_CHECK_CUDA(cudaEventRecord(ready_, compute));
  MPIACCEL_CHECK_CUDA(cudaStreamWaitEvent(nccl, ready_, 0));
  MPIACCEL_CHECK_CUDA(cudaEventRecord(start_, nccl));
}

void NcclWork::issued_on(cudaStream_t nccl) { MPIACCEL_CHECK_CUDA(cudaEventRecord(done_, nccl)); }

bool NcclWork::test() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (done_flag_) return true;
  const cudaError_t query = cudaEventQuery(done_);
  if (query == cudaErrorNotReady) return false;
  MPIACCEL_CHECK_CUDA(query);
  started_.store(anchor_->host_time_of(start_).time_since_epoch().count());
  finished_.store(anchor_->host_time_of(done_).time_since_epoch().count());
  tensors_.clear();  // the op no longer reads or writes them
  done_flag_ = true;
  return true;
}

void NcclWork::wait() {
  state_->check_async(description_);
  if (host_waits_) {
    while (!test()) {
      check_overrun();
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    return;
  }
  // Device side: the caller's stream waits; the watcher keeps the deadline.
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(state_->device));
  const cudaStream_t caller =
      c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(state_->device)).stream();
  MPIACCEL_CHECK_CUDA(cudaStreamWaitEvent(caller, done_, 0));
}

void NcclWork::check_overrun() {
  state_->check_async(description_);
  if (NcclClock::now() > issued_ + state_->timeout) state_->overran(description_);
}

NcclClock::time_point NcclWork::started_at() const {
  return NcclClock::time_point(NcclClock::duration(started_.load()));
}

NcclClock::time_point NcclWork::finished_at() const {
  return NcclClock::time_point(NcclClock::duration(finished_.load()));
}

}  // namespace mpiaccel::detail
