#pragma once
// The process's place in the job: MPI initialisation, world/local/node ranks,
// the launcher that started it, the device it computes on, and the
// pre-emption signal flags. No MPI type appears here.

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "mpiaccel/config_choices.hpp"

namespace mpiaccel {

namespace detail {
struct RuntimeMpi;     // MPI handles of the runtime (src/runtime/runtime_mpi.hpp)
struct RuntimeAccess;  // how the comm module reaches them
}  // namespace detail

/// Which launcher started this process, as read from the environment.
enum class Launcher { Singleton, Mpirun, Srun, OtherPmi };
const char* launcher_name(Launcher launcher);

/// What the launcher's environment says about this process, before (and
/// independently of) MPI. MPI is the truth after MPI_Init; this is for the log
/// and for sanity checks such as "srun started N tasks but each sees world 1".
struct LaunchEnvironment {
  Launcher launcher = Launcher::Singleton;
  int rank = -1;        ///< OMPI_COMM_WORLD_RANK / SLURM_PROCID / PMI_RANK, -1 if unset
  int size = -1;        ///< OMPI_COMM_WORLD_SIZE / SLURM_NTASKS / PMI_SIZE
  int local_rank = -1;  ///< OMPI_COMM_WORLD_LOCAL_RANK / SLURM_LOCALID
  int node_rank = -1;   ///< OMPI_COMM_WORLD_NODE_RANK / SLURM_NODEID
  std::string slurm_job_id;     ///< SLURM_JOB_ID ("" outside an allocation)
  std::string slurm_step_id;    ///< SLURM_STEP_ID ("" outside a job step)
  std::string tasks_per_node;   ///< SLURM_STEP_TASKS_PER_NODE, e.g. "4(x2)"

  /// Reads the launcher variables from `env` (name → value).
  static LaunchEnvironment from(const std::map<std::string, std::string>& env);
  /// Reads the launcher variables from this process's environment.
  static LaunchEnvironment from_process();
};

/// The process's environment variables as a map (for LaunchEnvironment::from).
std::map<std::string, std::string> process_environment();

/// Where this rank computes.
struct DeviceChoice {
  std::string device = "cpu";  ///< "cpu" or "cuda:N"
  int cuda_index = -1;         ///< N for "cuda:N", -1 on CPU
  int visible_gpus = 0;        ///< CUDA devices visible to this process
};

/// Picks the device of a rank: CPU when no GPU is visible, otherwise GPU
/// `local_rank` among the visible ones. More local ranks than GPUs is an error
/// unless `allow_gpu_sharing` (then ranks share GPUs round-robin).
DeviceChoice choose_device(int local_rank, int local_size, int visible_gpus,
                           bool allow_gpu_sharing);

struct RuntimeOptions {
  bool allow_gpu_sharing = false;
  /// Force CPU even when GPUs are visible (Cpu), demand one (Cuda), or Auto.
  DevicePreference device = DevicePreference::Auto;
};

/// RAII owner of MPI for the process: construct once in main(), before any
/// other mpiaccel object; MPI_Finalize runs when it is destroyed.
///
/// It initialises MPI at MPI_THREAD_MULTIPLE (the communication thread and the
/// HDF5 I/O of the main thread both call MPI) and fails clearly if the MPI
/// library provides less. It installs the fatal handler (an uncaught exception
/// on any rank logs and calls MPI_Abort, so no other rank hangs) and the
/// SIGUSR1/SIGTERM flags.
class Runtime {
 public:
  Runtime(int* argc, char*** argv, RuntimeOptions options = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  int node_rank() const { return node_rank_; }
  int node_count() const { return node_count_; }
  const std::string& host() const { return host_; }
  bool is_main_process() const { return rank_ == 0; }
  const LaunchEnvironment& launch() const { return launch_; }
  /// This rank's device under the current options. Throws mpiaccel::Error
  /// if the options cannot be met (e.g. two ranks on one GPU not allowed).
  const DeviceChoice& device() const;
  /// Chooses the device again under `options` (the run's [distributed]
  /// device / allow_gpu_sharing, known only after the config is read).
  void set_device_options(const RuntimeOptions& options);
  /// Called by a rank that is failing: true if every rank of the world calls
  /// it within `grace` (a failure they agreed on, e.g. a bad config: exit
  /// normally), false if some rank did not (a lone failure: the caller should
  /// report it and fatal() so the others do not wait for it forever).
  bool all_ranks_failing(std::chrono::milliseconds grace);

  /// The MPI library's version string (MPI_Get_library_version, first line).
  std::string mpi_library_version() const;

 private:
  friend struct detail::RuntimeAccess;
  RuntimeOptions options_;
  int rank_ = 0, world_size_ = 1;
  int local_rank_ = 0, local_size_ = 1;
  int node_rank_ = 0, node_count_ = 1;
  std::string host_;
  LaunchEnvironment launch_;
  int visible_gpus_ = 0;
  DeviceChoice device_;
  std::string device_error_;  // why the options cannot be met; "" if they can
  std::unique_ptr<detail::RuntimeMpi> mpi_;
  bool finalize_ = false;
};

/// True once SIGUSR1 or SIGTERM reached this process (pre-emption notice);
/// it stays true. This rank's alone: Accelerator::preemption_agreed makes
/// every rank see the same.
bool preemption_requested();

/// Logs `why` with the rank prefix and aborts the whole job (MPI_Abort with
/// `status`). Used where one rank cannot make the others join an agreement,
/// e.g. inside an in-flight collective. Safe to call from any thread.
[[noreturn]] void fatal(const std::string& why, int status = 1);

}  // namespace mpiaccel
