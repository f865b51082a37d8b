#pragma once
// How `mpiaccel launch` turns [launch] and the environment into a launcher
// command line. A pure function of its inputs (no getenv, no file system), so
// tests can feed it any environment: a workstation, a Slurm allocation, a
// user's OMP_NUM_THREADS, NCCL variables.

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "mpiaccel/config.hpp"

namespace mpiaccel::tool {

/// What the machine that runs `mpiaccel launch` is like.
struct HostFacts {
  int cores = 1;         ///< physical cores of this node (mpirun binds to cores)
  bool is_root = false;  ///< Open MPI refuses root without --allow-run-as-root
};

struct LaunchRequest {
  LaunchConfig launch;               ///< [launch] of the config
  /// Passed on to `mpiaccel train`, each as --config right after `train`
  /// (before its own --config files): the launch's files configure the run.
  std::vector<std::string> config_paths;
  /// config_paths is the user's default config, not named on the command
  /// line: passed only to a `mpiaccel train` given no --config of its own.
  bool config_is_default = false;
  std::vector<std::string> program;  ///< PROGRAM ARGS (non-empty)
};

/// The resolved job shape and the command that starts it.
struct LaunchPlan {
  LauncherChoice launcher = LauncherChoice::Mpirun;  ///< Mpirun or Srun
  bool in_allocation = false;  ///< SLURM_JOB_ID was set: the shape is the allocation's
  int nodes = 1;
  int ranks = 1;
  int ranks_per_node = 1;      ///< the most ranks on one node
  int cpus_per_rank = 1;
  int omp_threads = 1;         ///< OMP_NUM_THREADS of every rank
  bool oversubscribed = false; ///< more ranks × cpus on a node than it has cores
  /// Variables to set in our environment before exec (the launcher passes its
  /// environment on); printed as NAME=value prefixes by command_line().
  std::vector<std::pair<std::string, std::string>> env;
  std::vector<std::string> argv;   ///< the launcher command, argv[0] first
  std::vector<std::string> notes;  ///< warnings for stderr (one line each)
};

/// Builds the launch of `request` in environment `env` (name → value) on a
/// host like `host`. Outside Slurm (or with launcher = mpirun): `mpirun -np N`
/// with --map-by/--bind-to from the ranks per node and cores per rank, and -x
/// for OMP_NUM_THREADS and every NCCL_* and MPIACCEL_* variable of `env`.
/// Inside an allocation (SLURM_JOB_ID) with launcher = auto|srun: `srun
/// --mpi=pmix` with the allocation's nodes, tasks per node and cpus per task.
/// Throws UsageError for a shape that cannot run (e.g. fewer ranks than nodes).
LaunchPlan plan_launch(const LaunchRequest& request, const std::map<std::string, std::string>& env,
                       const HostFacts& host);

/// The plan as one shell line: env prefixes, then argv, each word quoted only
/// when the shell needs it.
std::string command_line(const LaunchPlan& plan);

/// `word` quoted for a POSIX shell ('...' with embedded quotes escaped), or as
/// is when it has no special characters.
std::string shell_quote(const std::string& word);

/// Splits `text` into words like a shell: whitespace separates, '...' and
/// "..." group, backslash escapes one character. For [launch] mpirun_args and
/// srun_args. Throws UsageError on an unterminated quote.
std::vector<std::string> split_shell_words(const std::string& text);

/// Expands Slurm's compressed per-node task counts, e.g. "4(x2),3" → {4, 4, 3}.
/// Throws UsageError on text Slurm would not write.
std::vector<int> expand_slurm_counts(const std::string& text);

}  // namespace mpiaccel::tool
