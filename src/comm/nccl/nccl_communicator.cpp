// The NCCL communicator: CUDA tensors, bootstrapped over an MPI communicator.
// Built only against a LibTorch with CUDA (it uses c10::cuda's streams and
// caching allocator).
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

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <ATen/ATen.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <initializer_list>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>

#include "comm/mpi_handle.hpp"
#include "comm/tensor_checks.hpp"
#include "mpiaccel/comm.hpp"
#include "mpiaccel/runtime.hpp"
#include "runtime/check_cuda.hpp"

namespace mpiaccel::detail {
namespace {

using Clock = std::chrono::steady_clock;

ncclDataType_t nccl_datatype(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return ncclFloat32;
    case at::kDouble: return ncclFloat64;
    case at::kHalf: return ncclFloat16;
    case at::kBFloat16: return ncclBfloat16;
    case at::kInt: return ncclInt32;
    case at::kLong: return ncclInt64;
    case at::kByte: return ncclUint8;
    default: break;
  }
  MPIACCEL_THROW(std::string("dtype ") + c10::toString(dtype) + " has no NCCL mapping");
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Avg: return ncclAvg;
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Min: return ncclMin;
  }
  MPIACCEL_THROW("unknown ReduceOp");
}

// What the communicator, its works and its watcher share.
struct NcclState {
  ncclComm_t comm = nullptr;
  int rank = 0, size = 1, device = 0;
  std::chrono::milliseconds timeout{0};
  std::atomic<bool> aborting{false};

  std::string where() const {
    return "on rank " + std::to_string(rank) + " of " + std::to_string(size) + " (cuda:" +
           std::to_string(device) + ")";
  }

  [[noreturn]] void abort(const std::string& why) {
    if (!aborting.exchange(true) && comm) ncclCommAbort(comm);
    fatal(why);
  }

  void overran(const std::string& what) {
    abort(what + " " + where() + " did not complete within " + format_duration(timeout) +
          ": a peer never joined (a rank skipped this collective, called a different one, "
          "crashed or is stuck), or the network stalled; if ops are legitimately this slow, "
          "raise [distributed] timeout_s");
  }

  // An error inside an issued collective cannot be agreed on with the peers.
  void check_async(const std::string& what) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t result = ncclCommGetAsyncError(comm, &state);
    if (result != ncclSuccess) state = result;
    if (state != ncclSuccess && state != ncclInProgress)
      abort(what + " " + where() + " failed in NCCL: " + ncclGetErrorString(state) + " (" +
            ncclGetLastError(comm) + ")");
  }

  // After a call returned ncclInProgress, NCCL wants the state polled until
  // it settles before the next call on this communicator.
  void settle(ncclResult_t result, const std::string& what) {
    if (result != ncclSuccess && result != ncclInProgress)
      abort(what + " " + where() + ": NCCL refused the call: " + ncclGetErrorString(result) +
            " (" + ncclGetLastError(comm) + ")");
    const auto deadline = Clock::now() + timeout;
    ncclResult_t state = result;
    while (state == ncclInProgress) {
      if (Clock::now() > deadline) overran(what);
      std::this_thread::yield();
      MPIACCEL_CHECK_NCCL(ncclCommGetAsyncError(comm, &state));
    }
    check_async(what);
  }
};

// A timing event and the host time at which the device reached it.
struct ClockAnchor {
  cudaEvent_t event = nullptr;
  Clock::time_point host;

  explicit ClockAnchor(cudaStream_t idle_stream) {
    MPIACCEL_CHECK_CUDA(cudaEventCreate(&event));
    MPIACCEL_CHECK_CUDA(cudaEventRecord(event, idle_stream));
    MPIACCEL_CHECK_CUDA(cudaEventSynchronize(event));
    host = Clock::now();
  }
  ~ClockAnchor() { cudaEventDestroy(event); }
  ClockAnchor(const ClockAnchor&) = delete;
  ClockAnchor& operator=(const ClockAnchor&) = delete;

  // `later` must have completed.
  Clock::time_point host_time_of(cudaEvent_t later) const {
    float ms = 0;
    if (cudaEventElapsedTime(&ms, event, later) != cudaSuccess) return host;
    return host + std::chrono::duration_cast<Clock::duration>(
                      std::chrono::duration<double, std::milli>(ms));
  }
};

class NcclWork final : public Work {
 public:
  NcclWork(std::shared_ptr<NcclState> state, std::string name, std::string description,
           std::vector<at::Tensor> tensors, std::shared_ptr<ClockAnchor> anchor, bool host_waits)
      : state_(std::move(state)), name_(std::move(name)), description_(std::move(description)),
        tensors_(std::move(tensors)), anchor_(std::move(anchor)), host_waits_(host_waits),
        issued_(Clock::now()) {
    MPIACCEL_CHECK_CUDA(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
    MPIACCEL_CHECK_CUDA(cudaEventCreate(&start_));
    MPIACCEL_CHECK_CUDA(cudaEventCreate(&done_));
  }
  ~NcclWork() override {
    cudaEventDestroy(ready_);
    cudaEventDestroy(start_);
    cudaEventDestroy(done_);
  }

  // The op's stream waits for what the caller queued so far on its own.
  void order_after(cudaStream_t compute, cudaStream_t nccl) {
    MPIACCEL_CHECK_CUDA(cudaEventRecord(ready_, compute));
    MPIACCEL_CHECK_CUDA(cudaStreamWaitEvent(nccl, ready_, 0));
    MPIACCEL_CHECK_CUDA(cudaEventRecord(start_, nccl));
  }
  void issued_on(cudaStream_t nccl) { MPIACCEL_CHECK_CUDA(cudaEventRecord(done_, nccl)); }

  bool test() override {
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

  void wait() override {
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

  // Aborts the job when the op is past its deadline or NCCL reports an error.
  void check_overrun() {
    state_->check_async(description_);
    if (Clock::now() > issued_ + state_->timeout) state_->overran(description_);
  }

  const std::string& name() const override { return name_; }
  Clock::time_point started_at() const override {
    return Clock::time_point(Clock::duration(started_.load()));
  }
  Clock::time_point finished_at() const override {
    return Clock::time_point(Clock::duration(finished_.load()));
  }

 private:
  std::shared_ptr<NcclState> state_;
  std::string name_, description_;
  std::mutex mutex_;
  std::vector<at::Tensor> tensors_;
  std::shared_ptr<ClockAnchor> anchor_;
  const bool host_waits_;
  const Clock::time_point issued_;
  cudaEvent_t ready_ = nullptr, start_ = nullptr, done_ = nullptr;
  bool done_flag_ = false;
  std::atomic<Clock::rep> started_{0}, finished_{0};
};

class NcclCommunicator final : public Communicator, public HostBacked {
 public:
  NcclCommunicator(Communicator& bootstrap, int cuda_index, std::chrono::milliseconds timeout);
  ~NcclCommunicator() override;

  int rank() const override { return state_->rank; }
  int size() const override { return state_->size; }
  std::string backend() const override { return "nccl"; }
  std::chrono::milliseconds timeout() const override { return state_->timeout; }

  WorkHandle all_reduce_async(at::Tensor tensor, ReduceOp op) override;
  WorkHandle reduce_scatter_async(at::Tensor output, at::Tensor input, ReduceOp op) override;
  WorkHandle all_gather_async(at::Tensor output, at::Tensor input) override;
  WorkHandle all_gather_uneven_async(at::Tensor output, at::Tensor input,
                                     std::vector<int64_t> counts) override;
  WorkHandle broadcast_async(at::Tensor tensor, int root) override;
  WorkHandle barrier_async() override;

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

NcclCommunicator::NcclCommunicator(Communicator& bootstrap, int cuda_index,
                                   std::chrono::milliseconds timeout)
    : state_(std::make_shared<NcclState>()) {
  MPIACCEL_CHECK(bootstrap.backend() == "mpi",
                 "make_nccl: the bootstrap communicator must be an MPI one, got " +
                     bootstrap.backend());
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
    const auto deadline = Clock::now() + state_->timeout;
    while (state == ncclInProgress && Clock::now() < deadline) {
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
  if (Clock::now() - anchor_->host > std::chrono::seconds(10))
    anchor_ = std::make_shared<ClockAnchor>(anchor_stream_);
  return anchor_;
}

bool NcclCommunicator::on_host(std::initializer_list<at::Tensor> tensors) {
  bool host = true, device = true;
  for (const at::Tensor& t : tensors) {
    host = host && t.defined() && t.device().is_cpu();
    device = device && !(t.defined() && t.device().is_cpu());
  }
  MPIACCEL_CHECK(host || device, "an NCCL communicator op got host and CUDA tensors together: "
                                 "put them all on the GPU, or all on the host");
  return host;
}

void NcclCommunicator::check(const at::Tensor& tensor, const char* op,
                             const char* argument) const {
  check_tensor(tensor, op, argument, /*want_cuda=*/true, "NCCL");
  MPIACCEL_CHECK(tensor.device().index() == state_->device,
                 std::string(op) + ": `" + argument + "` is on " + tensor.device().str() +
                     " but this NCCL communicator runs on cuda:" +
                     std::to_string(state_->device));
}

WorkHandle NcclCommunicator::launch(const char* name, std::string description,
                                    std::vector<at::Tensor> tensors,
                                    const std::function<ncclResult_t()>& issue, bool host_waits) {
  const auto device = static_cast<c10::DeviceIndex>(state_->device);
  std::lock_guard<std::mutex> lock(mutex_);
  c10::cuda::CUDAGuard guard(device);
  const cudaStream_t compute = c10::cuda::getCurrentCUDAStream(device).stream();
  auto work = std::make_shared<NcclWork>(state_, name, description, tensors, anchor(), host_waits);
  work->order_after(compute, stream_->stream());
  for (const at::Tensor& t : tensors)
    c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), *stream_);
  state_->settle(issue(), description);
  work->issued_on(stream_->stream());
  pending_.push_back(work);
  return work;
}

WorkHandle NcclCommunicator::all_reduce_async(at::Tensor tensor, ReduceOp op) {
  if (on_host({tensor})) return host_->all_reduce_async(std::move(tensor), op);
  check(tensor, "all_reduce", "tensor");
  check_reduce_op(op, tensor.scalar_type(), "all_reduce");
  const ncclDataType_t type = nccl_datatype(tensor.scalar_type());
  return launch("all_reduce", describe_op("all_reduce", tensor), {tensor}, [&] {
    return ncclAllReduce(tensor.data_ptr(), tensor.data_ptr(), static_cast<size_t>(tensor.numel()),
                         type, nccl_op(op), state_->comm, stream_->stream());
  });
}

WorkHandle NcclCommunicator::reduce_scatter_async(at::Tensor output, at::Tensor input,
                                                  ReduceOp op) {
  if (on_host({output, input})) return host_->reduce_scatter_async(std::move(output), std::move(input), op);
  const char* name = "reduce_scatter";
  check(output, name, "output");
  check(input, name, "input");
  check_same_dtype(output, input, name);
  check_reduce_op(op, input.scalar_type(), name);
  check_numel(input, output.numel() * size(), name, "input", "size() x output elements");
  const ncclDataType_t type = nccl_datatype(input.scalar_type());
  return launch(name, describe_op(name, input), {output, input}, [&] {
    return ncclReduceScatter(input.data_ptr(), output.data_ptr(),
                             static_cast<size_t>(output.numel()), type, nccl_op(op), state_->comm,
                             stream_->stream());
  });
}

WorkHandle NcclCommunicator::all_gather_async(at::Tensor output, at::Tensor input) {
  if (on_host({output, input})) return host_->all_gather_async(std::move(output), std::move(input));
  const char* name = "all_gather";
  check(output, name, "output");
  check(input, name, "input");
  check_same_dtype(output, input, name);
  check_numel(output, input.numel() * size(), name, "output", "size() x input elements");
  const ncclDataType_t type = nccl_datatype(input.scalar_type());
  return launch(name, describe_op(name, output), {output, input}, [&] {
    return ncclAllGather(input.data_ptr(), output.data_ptr(), static_cast<size_t>(input.numel()),
                         type, state_->comm, stream_->stream());
  });
}

WorkHandle NcclCommunicator::all_gather_uneven_async(at::Tensor output, at::Tensor input,
                                                     std::vector<int64_t> counts) {
  if (on_host({output, input}))
    return host_->all_gather_uneven_async(std::move(output), std::move(input), std::move(counts));
  const char* name = "all_gather_uneven";
  check(output, name, "output");
  check(input, name, "input");
  check_same_dtype(output, input, name);
  check_uneven_counts(counts, size(), rank(), output, input);
  const ncclDataType_t type = nccl_datatype(input.scalar_type());
  // NCCL has no all_gatherv: one broadcast per rank from its block, grouped
  // so NCCL runs them as one fused operation.
  return launch(name, describe_op(name, output), {output, input}, [&]() -> ncclResult_t {
    char* out = static_cast<char*>(output.data_ptr());
    const size_t element = output.element_size();
    ncclResult_t result = ncclGroupStart();
    if (result != ncclSuccess) return result;
    size_t offset = 0;
    for (int r = 0; r < size(); ++r) {
      const size_t count = static_cast<size_t>(counts[static_cast<size_t>(r)]);
      if (count > 0) {
        const void* send = r == rank() ? input.data_ptr() : out + offset * element;
        result = ncclBroadcast(send, out + offset * element, count, type, r, state_->comm,
                               stream_->stream());
        if (result != ncclSuccess && result != ncclInProgress) break;
      }
      offset += count;
    }
    const ncclResult_t ended = ncclGroupEnd();
    return result != ncclSuccess && result != ncclInProgress ? result : ended;
  });
}

WorkHandle NcclCommunicator::broadcast_async(at::Tensor tensor, int root) {
  if (on_host({tensor})) return host_->broadcast_async(std::move(tensor), root);
  check(tensor, "broadcast", "tensor");
  check_root(root, size(), "broadcast");
  const ncclDataType_t type = nccl_datatype(tensor.scalar_type());
  return launch("broadcast", describe_op("broadcast", tensor), {tensor}, [&] {
    return ncclBroadcast(tensor.data_ptr(), tensor.data_ptr(), static_cast<size_t>(tensor.numel()),
                         type, root, state_->comm, stream_->stream());
  });
}

WorkHandle NcclCommunicator::barrier_async() {
  // A one-word all-reduce: complete only once every rank has issued it. Its
  // wait() blocks the host, as a barrier's caller expects.
  return launch("barrier", "barrier", {barrier_word_}, [&] {
    return ncclAllReduce(barrier_word_.data_ptr(), barrier_word_.data_ptr(), 1, ncclFloat32,
                         ncclSum, state_->comm, stream_->stream());
  }, /*host_waits=*/true);
}

}  // namespace
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
