#include <unistd.h>  // environ (_GNU_SOURCE)

#include <cstdlib>
#include <map>
#include <string>

#include "mpiaccel/runtime.hpp"

namespace mpiaccel {
namespace {

int int_or(const std::map<std::string, std::string>& env, const char* name, int fallback) {
  auto it = env.find(name);
  if (it == env.end() || it->second.empty()) return fallback;
  char* end = nullptr;
  long value = std::strtol(it->second.c_str(), &end, 10);
  return (end && *end == '\0') ? static_cast<int>(value) : fallback;
}

std::string text_or_empty(const std::map<std::string, std::string>& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() ? std::string() : it->second;
}

bool has(const std::map<std::string, std::string>& env, const char* name) {
  return env.count(name) != 0;
}

}  // namespace

const char* launcher_name(Launcher launcher) {
  switch (launcher) {
    case Launcher::Singleton: return "singleton";
    case Launcher::Mpirun: return "mpirun";
    case Launcher::Srun: return "srun";
    case Launcher::OtherPmi: return "pmi";
  }
  return "?";
}

std::map<std::string, std::string> process_environment() {
  std::map<std::string, std::string> env;
  for (char** entry = environ; entry && *entry; ++entry) {
    std::string text(*entry);
    auto eq = text.find('=');
    if (eq != std::string::npos) env.emplace(text.substr(0, eq), text.substr(eq + 1));
  }
  return env;
}

LaunchEnvironment LaunchEnvironment::from(const std::map<std::string, std::string>& env) {
  LaunchEnvironment out;
  out.slurm_job_id = text_or_empty(env, "SLURM_JOB_ID");
  out.slurm_step_id = text_or_empty(env, "SLURM_STEP_ID");
  out.tasks_per_node = text_or_empty(env, "SLURM_STEP_TASKS_PER_NODE");
  // mpirun first: an mpirun inside a Slurm allocation still sets SLURM_JOB_ID,
  // and then it, not srun, started the ranks.
  if (has(env, "OMPI_COMM_WORLD_RANK")) {
    out.launcher = Launcher::Mpirun;
    out.rank = int_or(env, "OMPI_COMM_WORLD_RANK", -1);
    out.size = int_or(env, "OMPI_COMM_WORLD_SIZE", -1);
    out.local_rank = int_or(env, "OMPI_COMM_WORLD_LOCAL_RANK", -1);
    out.node_rank = int_or(env, "OMPI_COMM_WORLD_NODE_RANK", -1);
  } else if (has(env, "SLURM_STEP_ID") && has(env, "SLURM_PROCID")) {
    out.launcher = Launcher::Srun;
    out.rank = int_or(env, "SLURM_PROCID", -1);
    out.size = int_or(env, "SLURM_NTASKS", int_or(env, "SLURM_NPROCS", -1));
    out.local_rank = int_or(env, "SLURM_LOCALID", -1);
    out.node_rank = int_or(env, "SLURM_NODEID", -1);
  } else if (has(env, "PMI_RANK") || has(env, "PMIX_RANK")) {
    out.launcher = Launcher::OtherPmi;
    out.rank = int_or(env, "PMI_RANK", int_or(env, "PMIX_RANK", -1));
    out.size = int_or(env, "PMI_SIZE", -1);
    out.local_rank = int_or(env, "MPI_LOCALRANKID", int_or(env, "PMI_LOCAL_RANK", -1));
  }
  return out;
}

LaunchEnvironment LaunchEnvironment::from_process() { return from(process_environment()); }

}  // namespace mpiaccel
