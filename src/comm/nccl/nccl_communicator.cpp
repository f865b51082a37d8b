// The NCCL communicator: CUDA tensors, bootstrapped over an MPI communicator.
// Built only against a LibTorch with CUDA (it uses c10::cuda's streams and
// caching allocator). This file: bootstrap, split, teardown and the watcher
// thread; nccl_ops.cpp issues the ops; nccl_work.cpp is one issued op.
//
// Streams, as PyTorch's ProcessGroupNCCL orders them:
//   - Every communicator runs its collectives on a stream of its own, taken
//     from LibTorch's pool (non-blocking: it does not synchronise with the
//     legacy default stream). A split gets its own stream too, so FSDP's
//     all-gathers (prefetch) and reduce-scatters run beside each other and
//     beside compute.
//   - An op starts only after everything the caller queued so far on its
//     current stream: an event recorded there when the op is issued (for a
//     DDP bucket: when its last gradient was ready) is waited on by the NCCL
//     stream. The host does not block.
//   - Work::wait() makes the caller's current stream wait on the op's
//     completion event: kernels queued after it read the result; the host
//     goes on queueing them. Reading a result on the host (.item(), .cpu())
//     synchronises the compute stream and so waits for the op too. barrier()
//     is the one op whose wait() blocks the host.
//   - Every tensor an op touches is recorded on the NCCL stream
//     (CUDACachingAllocator::recordStream): the caching allocator does not
//     hand its memory out again until the op is done, even if the caller
//     drops the tensor at once.
//
// Deadlines. The host does not wait, so a watcher thread polls every op's
// completion event: an op not complete within the timeout of its issue, or an
// NCCL error reported by ncclCommGetAsyncError, calls ncclCommAbort and then
// fatal(): a kernel some peer never joined cannot be cancelled.
// Non-blocking NCCL (config.blocking = 0): a call that returns ncclInProgress
// is settled by polling ncclCommGetAsyncError under the same deadline.
//
// Times. started_at()/finished_at() are device times (timing events around
// the NCCL call on its stream) on the host's steady clock, through an anchor:
// an event recorded on an idle stream and synchronised at a known host time.
// They are set once test() has seen the op complete.

#include "comm/nccl/nccl_communicator.hpp"

#include <c10/cuda/CUDAGuard.h>
#include <ATen/ATen.h>

#include <cstring>

#include "mpiaccel/runtime.hpp"
#include "runtime/check_cuda.hpp"

namespace mpiaccel::detail {

NcclCommunicator::NcclCommunicator(Communicator& bootstrap, int cuda_index,
                                   std::chrono::milliseconds timeout)
    : state_(std::make_shared<NcclState>()) {
  MPIACCEL_CHECK(bootstrap.backend() == Backend::Mpi,
                 "make_nccl: the bootstrap communicator must be an MPI one, got " +
                     name_of(bootstrap.backend()));
  MPIACCEL_CHECK(timeout.count() > 0, "make_nccl: the timeout must be positive");
  host_ = bootstrap.split(0, bootstrap.rank());
  state_->rank = host_->rank();
  state_->size = host_->size();
  state_->device = cuda_index;
  state_->timeout = timeout;

  // Local problems are agreed first, so no rank waits for a peer that failed.
  int devices = 0;
  const cudaError_t counted = cudaGetDeviceCount(&devices);
  std::string why;
  if (counted != cudaSuccess)
    why = std::string("cannot count CUDA devices: ") + cudaGetErrorString(counted);
  else if (cuda_index < 0 || cuda_index >= devices)
    why = "CUDA device " + std::to_string(cuda_index) + " does not exist (" +
          std::to_string(devices) + " visible)";
  else if (cudaError_t set = cudaSetDevice(cuda_index); set != cudaSuccess)
    why = std::string("cudaSetDevice failed: ") + cudaGetErrorString(set);
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (why.empty() && state_->rank == 0) {
    const ncclResult_t made = ncclGetUniqueId(&id);
    if (made != ncclSuccess) why = std::string("ncclGetUniqueId failed: ") + ncclGetErrorString(made);
  }
  all_ok(*host_, why.empty(), "make_nccl: " + why);
  const std::string id_bytes =
      host_->broadcast_bytes(std::string(reinterpret_cast<const char*>(&id), sizeof(id)), 0);
  std::memcpy(&id, id_bytes.data(), sizeof(id));

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const ncclResult_t started =
      ncclCommInitRankConfig(&state_->comm, state_->size, id, state_->rank, &config);
  MPIACCEL_CHECK(started == ncclSuccess || started == ncclInProgress,
                 std::string("ncclCommInitRankConfig failed: ") + ncclGetErrorString(started));
  state_->settle(started, "NCCL communicator init");
  const auto device = static_cast<c10::DeviceIndex>(cuda_index);
  c10::cuda::CUDAGuard guard(device);
  stream_ = c10::cuda::getStreamFromPool(/*isHighPriority=*/true, device);
  MPIACCEL_CHECK_CUDA(cudaStreamCreateWithFlags(&anchor_stream_, cudaStreamNonBlocking));
  anchor_ = std::make_shared<ClockAnchor>(anchor_stream_);
  barrier_word_ = at::zeros({1}, at::TensorOptions(at::kFloat).device(at::kCUDA, device));
  watcher_ = std::thread([this] { watch(); });
}

NcclCommunicator::~NcclCommunicator() {
  // Drain under the watcher (it aborts an op that never completes), then stop it.
  cudaSetDevice(state_->device);
  if (stream_) cudaStreamSynchronize(stream_->stream());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  watch_cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
  if (state_->comm) {
    ncclResult_t state = ncclCommFinalize(state_->comm);
    const auto deadline = NcclClock::now() + state_->timeout;
    while (state == ncclInProgress && NcclClock::now() < deadline) {
      std::this_thread::yield();
      if (ncclCommGetAsyncError(state_->comm, &state) != ncclSuccess) break;
    }
    if (state == ncclSuccess)
      ncclCommDestroy(state_->comm);
    else
      ncclCommAbort(state_->comm);
  }
  anchor_.reset();
  if (anchor_stream_) cudaStreamDestroy(anchor_stream_);
}

void NcclCommunicator::watch() {
  cudaSetDevice(state_->device);
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    watch_cv_.wait_for(lock, std::chrono::milliseconds(100));
    try {
      for (auto it = pending_.begin(); it != pending_.end();) {
        if ((*it)->test()) {
          it = pending_.erase(it);
        } else {
          (*it)->check_overrun();
          ++it;
        }
      }
    } catch (const std::exception& e) {
      // A CUDA error on the stream: the op is lost, and peers may be in it.
      state_->abort(std::string("NCCL communicator watcher: ") + e.what());
    }
  }
}

std::shared_ptr<ClockAnchor> NcclCommunicator::anchor() {
  // Elapsed times are floats in ms: re-anchored every 10 s, they keep
  // microsecond resolution however long the run.
  if (NcclClock::now() - anchor_->host > std::chrono::seconds(10))
    anchor_ = std::make_shared<ClockAnchor>(anchor_stream_);
  return anchor_;
}

}  // namespace mpiaccel::detail

namespace mpiaccel {

bool nccl_available() { return true; }

std::string nccl_version() {
  int code = 0;
  if (ncclGetVersion(&code) != ncclSuccess) return "unknown";
  // NCCL ≥ 2.9 encodes major·10000 + minor·100 + patch, older ones ·1000.
  const int major = code >= 10000 ? code / 10000 : code / 1000;
  const int minor = code >= 10000 ? (code % 10000) / 100 : (code % 1000) / 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
}

std::shared_ptr<Communicator> make_nccl(Communicator& bootstrap, int cuda_index,
                                        std::chrono::milliseconds timeout) {
  return std::make_shared<detail::NcclCommunicator>(bootstrap, cuda_index, timeout);
}

}  // namespace mpiaccel
