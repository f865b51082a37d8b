#include "mpiaccel/runtime.hpp"

#include <mpi.h>
#include <torch/cuda.h>

#include <cstdlib>
#include <string>
#include <thread>

#include "core/error_identity.hpp"
#include "mpiaccel/log.hpp"
#include "runtime/check_mpi.hpp"
#include "runtime/peer_liveness.hpp"
#include "runtime/runtime_mpi.hpp"

namespace mpiaccel {

namespace detail {
void install_preemption_handlers();
void install_terminate_handler();
}  // namespace detail

namespace {

const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
  }
  return "unknown";
}

// Open MPI 4.1's OMPIO collective-I/O component fcoll/vulcan can hang or
// corrupt parallel HDF5 writes (HDF5 #1227, Open MPI #12718). dynamic_gen2 is
// safe; a user's explicit OMPI_MCA_fcoll wins. MCA variables are read from the
// environment during MPI_Init, so this must run before it.
void choose_safe_mpi_io_defaults() { setenv("OMPI_MCA_fcoll", "dynamic_gen2", /*overwrite=*/0); }

// A rank waiting in a blocking collective on its communication thread must not
// spin on a core its peers need for backward: Open MPI busy-polls unless it
// thinks the node is oversubscribed. Yielding cost +16 ms CPU per DDP step
// instead of +36 ms on 2 ranks / 2 cores (bench/ddp). A user's value wins.
void prefer_yielding_mpi_waits() { setenv("OMPI_MCA_mpi_yield_when_idle", "1", /*overwrite=*/0); }

void apply_log_level_from_environment() {
  if (const char* level = std::getenv("MPIACCEL_LOG_LEVEL")) set_log_level(choice_named<LogLevel>(level, "MPIACCEL_LOG_LEVEL"));
}

}  // namespace

Runtime::Runtime(int* argc, char*** argv, RuntimeOptions options)
    : options_(std::move(options)), mpi_(std::make_unique<detail::RuntimeMpi>()) {
  apply_log_level_from_environment();
  int initialized = 0;
  MPI_Initialized(&initialized);
  MPIACCEL_CHECK(!initialized, "MPI is already initialised: construct one mpiaccel::Runtime, "
                               "before any other MPI use, and let it own MPI");
  choose_safe_mpi_io_defaults();
  prefer_yielding_mpi_waits();
  int provided = MPI_THREAD_SINGLE;
  MPIACCEL_CHECK_MPI(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
  finalize_ = true;
  if (provided < MPI_THREAD_MULTIPLE) {
    MPI_Finalize();
    finalize_ = false;
    MPIACCEL_THROW(std::string("the MPI library provides only ") + thread_level_name(provided) +
                   ", mpiaccel needs MPI_THREAD_MULTIPLE (its communication thread and the "
                   "HDF5 I/O both call MPI): use an MPI built with thread support "
                   "(Open MPI: --enable-mpi-thread-multiple, the default since 3.0)");
  }
  detail::install_terminate_handler();
  // Errors come back as codes on our communicators, so they become
  // mpiaccel::Error with the library's message instead of a bare abort.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPIACCEL_CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &mpi_->world));
  MPIACCEL_CHECK_MPI(MPI_Comm_rank(mpi_->world, &rank_));
  MPIACCEL_CHECK_MPI(MPI_Comm_size(mpi_->world, &world_size_));

  char name[MPI_MAX_PROCESSOR_NAME] = {0};
  int name_length = 0;
  MPIACCEL_CHECK_MPI(MPI_Get_processor_name(name, &name_length));
  host_.assign(name, static_cast<size_t>(name_length));
  set_log_identity(rank_, world_size_, host_);
  detail::set_error_identity(rank_, host_);

  // After MPI_Init, MPI is the truth: the local rank is the rank among the
  // processes sharing this node's memory, whatever the launcher's variables say.
  MPIACCEL_CHECK_MPI(MPI_Comm_split_type(mpi_->world, MPI_COMM_TYPE_SHARED, rank_,
                                         MPI_INFO_NULL, &mpi_->node));
  MPIACCEL_CHECK_MPI(MPI_Comm_rank(mpi_->node, &local_rank_));
  MPIACCEL_CHECK_MPI(MPI_Comm_size(mpi_->node, &local_size_));

  // Node index: the node leaders (local rank 0) number themselves in world
  // order and tell their node.
  MPI_Comm leaders = MPI_COMM_NULL;
  MPIACCEL_CHECK_MPI(MPI_Comm_split(mpi_->world, local_rank_ == 0 ? 0 : MPI_UNDEFINED, rank_,
                                    &leaders));
  int node_info[2] = {0, 1};
  if (leaders != MPI_COMM_NULL) {
    MPIACCEL_CHECK_MPI(MPI_Comm_rank(leaders, &node_info[0]));
    MPIACCEL_CHECK_MPI(MPI_Comm_size(leaders, &node_info[1]));
    MPI_Comm_free(&leaders);
  }
  MPIACCEL_CHECK_MPI(MPI_Bcast(node_info, 2, MPI_INT, 0, mpi_->node));
  node_rank_ = node_info[0];
  node_count_ = node_info[1];
  // Whom a failing job lost, asked without MPI (fatal() reports it).
  detail::start_peer_liveness(mpi_->world, rank_, host_);

  launch_ = LaunchEnvironment::from_process();
  MPIACCEL_CHECK(!(launch_.launcher == Launcher::Srun && launch_.size > 1 && world_size_ == 1),
                 "Slurm started " + std::to_string(launch_.size) +
                     " tasks but MPI sees a world of 1: each task ran as a singleton. Launch "
                     "with `srun --mpi=pmix` (see `srun --mpi=list`), or with mpirun");

  visible_gpus_ = static_cast<int>(torch::cuda::device_count());
  set_device_options(options_);
  detail::install_preemption_handlers();
  log_debug(std::string("runtime: launcher ") + launcher_name(launch_.launcher) + ", node " +
            std::to_string(node_rank_) + "/" + std::to_string(node_count_) + ", local rank " +
            std::to_string(local_rank_) + "/" + std::to_string(local_size_) + ", device " +
            (device_error_.empty() ? device_.device : "unresolved"));
}

void Runtime::set_device_options(const RuntimeOptions& options) {
  options_ = options;
  device_error_.clear();
  try {
    const int usable = options_.device == DevicePreference::Cpu ? 0 : visible_gpus_;
    MPIACCEL_CHECK(options_.device != DevicePreference::Cuda || usable > 0,
                   "[distributed] device = cuda but no CUDA device is visible to this rank "
                   "(CUDA_VISIBLE_DEVICES, --gpus-per-task?)");
    device_ = choose_device(local_rank_, local_size_, usable, options_.allow_gpu_sharing);
  } catch (const Error& e) {
    device_ = DeviceChoice{};
    device_error_ = e.message();
  }
}

const DeviceChoice& Runtime::device() const {
  MPIACCEL_CHECK(device_error_.empty(), device_error_);
  return device_;
}

Runtime::~Runtime() {
  if (mpi_->node != MPI_COMM_NULL) MPI_Comm_free(&mpi_->node);
  if (mpi_->world != MPI_COMM_NULL) MPI_Comm_free(&mpi_->world);
  if (finalize_) MPI_Finalize();
}

bool Runtime::all_ranks_failing(std::chrono::milliseconds grace) {
  if (world_size_ == 1) return true;
  MPI_Request request = MPI_REQUEST_NULL;
  if (MPI_Ibarrier(mpi_->world, &request) != MPI_SUCCESS) return false;  // collective (failing ranks only)
  const auto deadline = std::chrono::steady_clock::now() + grace;
  int done = 0;
  while (!done && std::chrono::steady_clock::now() < deadline) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // An unfinished barrier is left pending on purpose: the caller aborts.
  return done != 0;
}

std::string Runtime::mpi_library_version() const {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int length = 0;
  MPI_Get_library_version(text, &length);
  std::string version(text, static_cast<size_t>(length));
  auto newline = version.find_first_of("\r\n,");
  return newline == std::string::npos ? version : version.substr(0, newline);
}

}  // namespace mpiaccel
