// `mpiaccel launch [--dry-run] [--config F]... [launch.key=value ...] -- PROGRAM ARGS`:
// starts PROGRAM under mpirun, or srun inside a Slurm allocation, with the
// shape of [launch] (the command itself is built by launch_plan.cpp).

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "command.hpp"
#include "launch_plan.hpp"
#include "mpiaccel/config.hpp"
#include "mpiaccel/config_files.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/runtime.hpp"

namespace mpiaccel::tool {
namespace {

struct LaunchArguments {
  bool dry_run = false;
  std::vector<std::string> config_paths;
  std::vector<std::string> overrides;
  std::vector<std::string> program;
};

LaunchArguments parse_launch_arguments(const std::vector<std::string>& args) {
  LaunchArguments out;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const auto& a = args[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a == "--dry-run") {
      out.dry_run = true;
    } else if (a == "--config" || a == "-c") {
      if (i + 1 >= args.size()) throw UsageError("--config needs a file");
      out.config_paths.push_back(args[++i]);
    } else if (a.rfind("--config=", 0) == 0) {
      out.config_paths.push_back(a.substr(9));
    } else if (a.find('=') != std::string::npos && a[0] != '-') {
      if (a.rfind("launch.", 0) != 0) {
        throw UsageError("'" + a + "': only [launch] keys are set here; training overrides go after "
                         "the program (mpiaccel launch -- mpiaccel train " + a + ")");
      }
      out.overrides.push_back(a);
    } else if (a[0] == '-') {
      throw UsageError("unknown option '" + a + "'");
    } else {
      break;  // the program, without a "--" before it
    }
  }
  out.program.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  if (out.program.empty()) throw UsageError("no program given: mpiaccel launch [options] -- PROGRAM ARGS");
  return out;
}

// Physical cores this process may run on: mpirun binds to cores, so two
// hardware threads of one core count once.
int physical_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  std::set<std::pair<std::string, std::string>> cores;
  int cpus = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    ++cpus;
    const std::string topology = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    std::ifstream package(topology + "physical_package_id"), core(topology + "core_id");
    std::string package_id, core_id;
    if (!(package >> package_id) || !(core >> core_id)) return std::max(1, CPU_COUNT(&set));
    cores.emplace(package_id, core_id);
  }
  return cores.empty() ? std::max(1, cpus) : static_cast<int>(cores.size());
}

[[noreturn]] void exec_plan(const LaunchPlan& plan) {
  for (const auto& [name, value] : plan.env) setenv(name.c_str(), value.c_str(), 1);
  std::vector<char*> argv;
  for (const auto& word : plan.argv) argv.push_back(const_cast<char*>(word.c_str()));
  argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  // exec, not fork: signals sent to us (Slurm's USR1, Ctrl-C) reach the
  // launcher, which forwards them to the ranks, and its exit status is ours.
  execvp(argv[0], argv.data());
  const int error = errno;
  std::string hint = plan.launcher == LauncherChoice::Srun ? "run inside a Slurm allocation with srun on PATH"
                                             : "install Open MPI (Debian: openmpi-bin)";
  MPIACCEL_THROW("cannot run '" + plan.argv.front() + "': " + std::strerror(error) + "; " + hint +
                 " or set [launch] launcher");
}

int run_launch(const std::vector<std::string>& args, int*, char***) {
  auto parsed = parse_launch_arguments(args);
  const auto env = process_environment();
  const bool use_default = parsed.config_paths.empty();
  if (use_default) {
    // Like `accelerate launch`: the file `mpiaccel config` wrote is the default.
    std::string fallback = default_config_path(env);
    if (!fallback.empty() && std::filesystem::exists(fallback)) parsed.config_paths.push_back(fallback);
  }
  const Config config = resolve_config_files(parsed.config_paths, parsed.overrides).config;

  LaunchRequest request{config.launch, parsed.config_paths, use_default, parsed.program};
  HostFacts host{physical_cores(), geteuid() == 0};
  LaunchPlan plan = plan_launch(request, env, host);
  for (const auto& note : plan.notes) std::cerr << "mpiaccel: launch: note: " << note << "\n";
  if (parsed.dry_run) {
    std::cout << command_line(plan) << "\n";
    return 0;
  }
  std::cerr << "mpiaccel: launch: " << command_line(plan) << "\n";
  exec_plan(plan);
}

}  // namespace

extern const Command kLaunchCommand = {
    "launch", "run a program under mpirun or srun with the shape of [launch]",
    "usage: mpiaccel launch [--dry-run] [--config FILE]... [launch.key=value ...] -- PROGRAM [ARGS]\n\n"
    "Builds the launcher command from [launch] (num_machines, num_processes, launcher,\n"
    "cpus_per_process, mpirun_args, srun_args) and runs it in place of this process, so\n"
    "signals reach the launcher and its exit status is this command's.\n\n"
    "  outside Slurm   mpirun -np N --map-by ppr:<ranks per node>:node:PE=<cores per rank>\n"
    "                  --bind-to core (--oversubscribe --bind-to none when ranks x cores\n"
    "                  exceed the node), -x OMP_NUM_THREADS and -x for every NCCL_* and\n"
    "                  MPIACCEL_* variable set; --allow-run-as-root as root\n"
    "  in a Slurm job  srun --mpi=pmix with the allocation's nodes, tasks per node and cpus\n"
    "  (SLURM_JOB_ID)  per task, --cpu-bind=cores, -K1 (the step ends when a task fails);\n"
    "                  the allocation wins over [launch] num_processes/num_machines\n\n"
    "OMP_NUM_THREADS is the cores per rank (cpus_per_process, or the node's cores / ranks\n"
    "per node, at least 1) unless it is already set in the environment.\n"
    "`mpiaccel train` gets the launch's --config FILEs (before its own); the default\n"
    "config only when it has none.\n\n"
    "options:\n"
    "  --config FILE, -c FILE  the config, repeatable: INI, Accelerate YAML, DeepSpeed JSON,\n"
    "                          Trainer fsdp_config or TrainingArguments JSON (docs/config.md;\n"
    "                          default: $XDG_CONFIG_HOME/mpiaccel/default.ini if it exists,\n"
    "                          else the built-in defaults)\n"
    "  launch.key=value        override a [launch] key, e.g. launch.num_processes=4\n"
    "  --dry-run               print the command (one shell line) instead of running it\n\n"
    "example:\n"
    "  mpiaccel launch --config run.ini -- mpiaccel train train.max_steps=200\n",
    run_launch};

}  // namespace mpiaccel::tool
