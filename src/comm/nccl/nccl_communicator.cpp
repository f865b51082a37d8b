// The NCCL communicator: CUDA tensors, bootstrapped over an MPI communicator.
//
// Streams: the communicator owns one stream created with cudaStreamCreate,
// i.e. a BLOCKING stream. Blocking streams synchronise implicitly with the
// legacy default stream, which LibTorch uses unless told otherwise, so a
// collective starts only after the kernels that produced its input, and later
// default-stream kernels (and the caching allocator's reuse of a freed input)
// wait for it, without any event plumbing through c10::cuda. The price: it
// does not overlap with default-stream compute; DDP-style overlap on a GPU
// needs compute on a non-default stream. Only the CUDA runtime API is used, so
// any LibTorch build works.
//
// Non-blocking NCCL (config.blocking = 0): every NCCL call may return
// ncclInProgress, after which the communicator's state is polled with
// ncclCommGetAsyncError until it settles, under the deadline. A deadline that
// passes (init, an op nobody waits for, a hung peer) calls ncclCommAbort and
// then fatal(): an NCCL kernel some peer never joined cannot be cancelled.

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <numeric>
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

// Makes `device` current for a scope: NCCL and the stream belong to it, while
// the calling thread may have another device current.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    cudaGetDevice(&previous_);
    if (previous_ != device) MPIACCEL_CHECK_CUDA(cudaSetDevice(device));
  }
  ~DeviceScope() { cudaSetDevice(previous_); }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0;
};

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

class NcclWork final : public Work {
 public:
  NcclWork(std::shared_ptr<NcclState> state, std::string name, std::string description,
           std::vector<at::Tensor> tensors)
      : state_(std::move(state)), name_(std::move(name)), description_(std::move(description)),
        tensors_(std::move(tensors)) {
    MPIACCEL_CHECK_CUDA(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
  }
  ~NcclWork() override { cudaEventDestroy(event_); }

  // started_at is when the op was put on the stream: it cannot begin earlier,
  // and its deadline counts from there.
  void recorded_on(cudaStream_t stream) {
    MPIACCEL_CHECK_CUDA(cudaEventRecord(event_, stream));
    started_.store(Clock::now().time_since_epoch().count());
  }

  bool test() override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (done_) return true;
    const cudaError_t query = cudaEventQuery(event_);
    if (query == cudaErrorNotReady) return false;
    MPIACCEL_CHECK_CUDA(query);
    finished_.store(Clock::now().time_since_epoch().count());
    tensors_.clear();  // the op no longer reads or writes them
    done_ = true;
    return true;
  }

  void wait() override {
    while (!test()) {
      check_overrun();
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  // Aborts the job when the op is past its deadline or NCCL reports an error.
  void check_overrun() {
    state_->check_async(description_);
    if (Clock::now() > started_at() + state_->timeout) state_->overran(description_);
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
  cudaEvent_t event_ = nullptr;
  bool done_ = false;
  std::atomic<Clock::rep> started_{0}, finished_{0};
};

class NcclCommunicator final : public Communicator {
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
  /// The MPI communicator host bytes travel on (comm/mpi_handle.hpp).
  const Communicator& host() const { return *host_; }
  std::shared_ptr<Communicator> split(int, int) override {
    MPIACCEL_THROW("split is not supported on the NCCL communicator: split the MPI "
                   "communicator and call make_nccl on the part");
  }

 private:
  void check(const at::Tensor& tensor, const char* op, const char* argument) const;
  // Puts `issue` (the NCCL calls) on the stream under one lock, so calls from
  // several threads reach NCCL whole and in one order.
  WorkHandle launch(const char* name, std::string description, std::vector<at::Tensor> tensors,
                    const std::function<ncclResult_t()>& issue);
  void watch();

  std::shared_ptr<Communicator> host_;
  std::shared_ptr<NcclState> state_;
  cudaStream_t stream_ = nullptr;
  float* barrier_word_ = nullptr;
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
  MPIACCEL_CHECK_CUDA(cudaStreamCreate(&stream_));
  MPIACCEL_CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&barrier_word_), sizeof(float)));
  watcher_ = std::thread([this] { watch(); });
}

NcclCommunicator::~NcclCommunicator() {
  // Drain under the watcher (it aborts an op that never completes), then stop it.
  cudaSetDevice(state_->device);
  if (stream_) cudaStreamSynchronize(stream_);
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
  if (barrier_word_) cudaFree(barrier_word_);
  if (stream_) cudaStreamDestroy(stream_);
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
                                    const std::function<ncclResult_t()>& issue) {
  auto work = std::make_shared<NcclWork>(state_, name, description, std::move(tensors));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    DeviceScope scope(state_->device);
    state_->settle(issue(), description);
    work->recorded_on(stream_);
    pending_.push_back(work);
  }
  return work;
}

WorkHandle NcclCommunicator::all_reduce_async(at::Tensor tensor, ReduceOp op) {
  check(tensor, "all_reduce", "tensor");
  check_reduce_op(op, tensor.scalar_type(), "all_reduce");
  const ncclDataType_t type = nccl_datatype(tensor.scalar_type());
  return launch("all_reduce", describe_op("all_reduce", tensor), {tensor}, [&] {
    return ncclAllReduce(tensor.data_ptr(), tensor.data_ptr(), static_cast<size_t>(tensor.numel()),
                         type, nccl_op(op), state_->comm, stream_);
  });
}

WorkHandle NcclCommunicator::reduce_scatter_async(at::Tensor output, at::Tensor input,
                                                  ReduceOp op) {
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
                             stream_);
  });
}

WorkHandle NcclCommunicator::all_gather_async(at::Tensor output, at::Tensor input) {
  const char* name = "all_gather";
  check(output, name, "output");
  check(input, name, "input");
  check_same_dtype(output, input, name);
  check_numel(output, input.numel() * size(), name, "output", "size() x input elements");
  const ncclDataType_t type = nccl_datatype(input.scalar_type());
  return launch(name, describe_op(name, output), {output, input}, [&] {
    return ncclAllGather(input.data_ptr(), output.data_ptr(), static_cast<size_t>(input.numel()),
                         type, state_->comm, stream_);
  });
}

WorkHandle NcclCommunicator::all_gather_uneven_async(at::Tensor output, at::Tensor input,
                                                     std::vector<int64_t> counts) {
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
        result = ncclBroadcast(send, out + offset * element, count, type, r, state_->comm, stream_);
        if (result != ncclSuccess && result != ncclInProgress) break;
      }
      offset += count;
    }
    const ncclResult_t ended = ncclGroupEnd();
    return result != ncclSuccess && result != ncclInProgress ? result : ended;
  });
}

WorkHandle NcclCommunicator::broadcast_async(at::Tensor tensor, int root) {
  check(tensor, "broadcast", "tensor");
  check_root(root, size(), "broadcast");
  const ncclDataType_t type = nccl_datatype(tensor.scalar_type());
  return launch("broadcast", describe_op("broadcast", tensor), {tensor}, [&] {
    return ncclBroadcast(tensor.data_ptr(), tensor.data_ptr(), static_cast<size_t>(tensor.numel()),
                         type, root, state_->comm, stream_);
  });
}

WorkHandle NcclCommunicator::barrier_async() {
  // A one-word all-reduce: complete only once every rank has issued it.
  return launch("barrier", "barrier", {}, [&] {
    return ncclAllReduce(barrier_word_, barrier_word_, 1, ncclFloat32, ncclSum, state_->comm,
                         stream_);
  });
}

}  // namespace

MPI_Comm nccl_host_mpi_comm(const Communicator& comm) {
  const auto* nccl = dynamic_cast<const NcclCommunicator*>(&comm);
  return nccl ? mpi_comm_of(nccl->host()) : MPI_COMM_NULL;
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
