#include "launch_plan.hpp"

#include <algorithm>
#include <cstdlib>
#include <initializer_list>

#include "command.hpp"

namespace mpiaccel::tool {
namespace {

using Env = std::map<std::string, std::string>;

std::string value_of(const Env& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() ? std::string() : it->second;
}

// A positive integer from the environment, 0 when unset or not a number.
int positive_int(const Env& env, const char* name) {
  std::string text = value_of(env, name);
  if (text.empty()) return 0;
  char* end = nullptr;
  long value = std::strtol(text.c_str(), &end, 10);
  return (*end == '\0' && value > 0 && value < (1L << 30)) ? static_cast<int>(value) : 0;
}

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

// True if the user's extra launcher arguments already say `option` (as
// "--opt value" or "--opt=value"): then theirs wins and ours is left out,
// because Open MPI and Slurm reject or override conflicting directives.
bool user_gave(const std::vector<std::string>& words, std::initializer_list<const char*> options) {
  for (const auto& word : words) {
    for (const char* option : options) {
      if (word == option || starts_with(word, std::string(option) + "=")) return true;
    }
  }
  return false;
}

std::string basename_of(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// `mpiaccel train` gets the launch's config files, so the launch shape and
// the training run read the same files (an Accelerate YAML on the launch
// line, the model's INI on train's, as `accelerate launch --config_file`
// configures the script it starts).
std::vector<std::string> program_with_config(const LaunchRequest& request) {
  std::vector<std::string> program = request.program;
  if (request.config_paths.empty() || basename_of(program.front()) != "mpiaccel") return program;
  const auto train = std::find(program.begin() + 1, program.end(), "train");
  if (train == program.end()) return program;
  const bool has_config = std::any_of(program.begin() + 1, program.end(), [](const std::string& a) {
    return a == "--config" || a == "-c" || starts_with(a, "--config=");
  });
  if (has_config && request.config_is_default) return program;
  std::vector<std::string> configs;
  for (const auto& path : request.config_paths) configs.insert(configs.end(), {"--config", path});
  program.insert(train + 1, configs.begin(), configs.end());
  return program;
}

int ceil_div(int a, int b) { return (a + b - 1) / b; }

// The allocation's shape, from the variables sbatch/salloc export. Slurm
// always sets SLURM_TASKS_PER_NODE ("4(x2)"); SLURM_NTASKS_PER_NODE only when
// the user asked for it, so it is read first and the compressed list is the
// fallback. Returns the per-node task counts (one entry per node).
std::vector<int> allocation_tasks(const Env& env, int nodes) {
  int per_node = positive_int(env, "SLURM_NTASKS_PER_NODE");
  if (per_node > 0) return std::vector<int>(nodes, per_node);
  std::string text = value_of(env, "SLURM_TASKS_PER_NODE");
  if (text.empty()) text = value_of(env, "SLURM_STEP_TASKS_PER_NODE");
  if (text.empty()) return {};
  return expand_slurm_counts(text);
}

void plan_omp_threads(LaunchPlan& plan, const Env& env) {
  // A user's OMP_NUM_THREADS wins: they may want fewer threads than cores
  // (e.g. leaving cores to data loading) and said so explicitly.
  int user = positive_int(env, "OMP_NUM_THREADS");
  plan.omp_threads = user > 0 ? user : std::max(1, plan.cpus_per_rank);
}

void plan_srun(LaunchPlan& plan, const LaunchRequest& request, const std::vector<int>& tasks) {
  const auto user = split_shell_words(request.launch.srun_args);
  plan.launcher = LauncherChoice::Srun;
  auto& argv = plan.argv;
  argv = {"srun"};
  if (!user_gave(user, {"--mpi"})) argv.push_back("--mpi=pmix");
  argv.push_back("--nodes=" + std::to_string(plan.nodes));
  bool uniform = !tasks.empty() && std::all_of(tasks.begin(), tasks.end(),
                                               [&](int t) { return t == tasks.front(); });
  if (uniform && static_cast<int>(tasks.size()) == plan.nodes) {
    argv.push_back("--ntasks-per-node=" + std::to_string(plan.ranks_per_node));
  } else {
    argv.push_back("--ntasks=" + std::to_string(plan.ranks));
  }
  // Since Slurm 22.05 srun no longer inherits --cpus-per-task from the batch
  // job, so it is always given explicitly.
  argv.push_back("--cpus-per-task=" + std::to_string(plan.cpus_per_rank));
  if (!user_gave(user, {"--cpu-bind", "--cpu_bind"})) argv.push_back("--cpu-bind=cores");
  // -K1: when one task fails, kill the step instead of leaving the others
  // blocked in a collective until the time limit.
  if (!user_gave(user, {"-K", "--kill-on-bad-exit", "-K0", "-K1"})) argv.push_back("-K1");
  argv.insert(argv.end(), user.begin(), user.end());
  // srun passes its whole environment to the tasks (--export=ALL), so
  // OMP_NUM_THREADS is set in ours; NCCL_* and MPIACCEL_* travel the same way.
  plan.env.emplace_back("OMP_NUM_THREADS", std::to_string(plan.omp_threads));
}

void plan_mpirun(LaunchPlan& plan, const LaunchRequest& request, const Env& env, const HostFacts& host) {
  const auto user = split_shell_words(request.launch.mpirun_args);
  plan.launcher = LauncherChoice::Mpirun;
  auto& argv = plan.argv;
  argv = {"mpirun", "-np", std::to_string(plan.ranks)};
  if (host.is_root && !user_gave(user, {"--allow-run-as-root"})) argv.push_back("--allow-run-as-root");
  if (!user_gave(user, {"--map-by", "--bind-to", "--rankfile", "-rf"})) {
    const std::string per_node = std::to_string(plan.ranks_per_node);
    if (plan.oversubscribed) {
      // Binding more ranks than cores would stack them on the same cores
      // while others idle: let the kernel schedule them instead.
      argv.insert(argv.end(), {"--oversubscribe", "--map-by", "ppr:" + per_node + ":node",
                               "--bind-to", "none"});
    } else {
      // ppr:N:node places the same number of ranks on every node (rank r on
      // node r / N, as the runtime's node_rank expects); PE=c gives each rank
      // c consecutive cores to bind to, which is what OMP_NUM_THREADS uses.
      argv.insert(argv.end(), {"--map-by",
                               "ppr:" + per_node + ":node:PE=" + std::to_string(plan.cpus_per_rank),
                               "--bind-to", "core"});
    }
  } else if (plan.oversubscribed && !user_gave(user, {"--oversubscribe"})) {
    argv.push_back("--oversubscribe");
  }
  // mpirun starts remote ranks with orted's environment, not ours: every
  // variable the ranks need is named with -x.
  argv.push_back("-x");
  argv.push_back("OMP_NUM_THREADS=" + std::to_string(plan.omp_threads));
  for (const auto& [name, value] : env) {
    (void)value;
    if (starts_with(name, "NCCL_") || starts_with(name, "MPIACCEL_")) {
      argv.push_back("-x");
      argv.push_back(name);
    }
  }
  argv.insert(argv.end(), user.begin(), user.end());
  if (plan.nodes > 1 && !plan.in_allocation &&
      !user_gave(user, {"--hostfile", "-hostfile", "--machinefile", "-machinefile", "-H", "--host",
                        "-host"})) {
    plan.notes.push_back("[launch] num_machines = " + std::to_string(plan.nodes) +
                         " outside a Slurm allocation: name the hosts, e.g. "
                         "launch.mpirun_args=\"--hostfile hosts.txt\"");
  }
}

}  // namespace

std::vector<int> expand_slurm_counts(const std::string& text) {
  std::vector<int> counts;
  size_t i = 0;
  auto bad = [&]() { return UsageError("cannot read Slurm task counts '" + text + "'"); };
  auto number = [&]() {
    size_t start = i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
    if (i == start || i - start > 6) throw bad();
    return std::stoi(text.substr(start, i - start));
  };
  while (i < text.size()) {
    int count = number();
    int repeat = 1;
    if (i < text.size() && text[i] == '(') {
      if (text.compare(i, 2, "(x") != 0) throw bad();
      i += 2;
      repeat = number();
      if (i >= text.size() || text[i] != ')') throw bad();
      ++i;
    }
    if (count < 1 || repeat < 1) throw bad();
    counts.insert(counts.end(), repeat, count);
    if (i < text.size()) {
      if (text[i] != ',' || i + 1 == text.size()) throw bad();
      ++i;
    }
  }
  if (counts.empty()) throw bad();
  return counts;
}

LaunchPlan plan_launch(const LaunchRequest& request, const Env& env, const HostFacts& host) {
  if (request.program.empty()) throw UsageError("no program to launch (mpiaccel launch -- PROGRAM ARGS)");
  const LaunchConfig& launch = request.launch;
  LaunchPlan plan;
  plan.in_allocation = !value_of(env, "SLURM_JOB_ID").empty();
  const bool use_srun =
      launch.launcher == LauncherChoice::Srun || (launch.launcher == LauncherChoice::Auto && plan.in_allocation);
  std::vector<int> tasks;

  if (plan.in_allocation) {
    // The allocation is the truth: sbatch already reserved nodes, tasks and
    // cores, and asking for a different shape would fail or waste them.
    plan.nodes = positive_int(env, "SLURM_JOB_NUM_NODES");
    if (plan.nodes == 0) plan.nodes = positive_int(env, "SLURM_NNODES");
    if (plan.nodes == 0) plan.nodes = static_cast<int>(launch.num_machines);
    tasks = allocation_tasks(env, plan.nodes);
    if (!tasks.empty()) {
      plan.ranks = 0;
      for (int t : tasks) plan.ranks += t;
      plan.ranks_per_node = *std::max_element(tasks.begin(), tasks.end());
    } else {
      plan.ranks = static_cast<int>(launch.num_processes);
      plan.ranks_per_node = ceil_div(plan.ranks, plan.nodes);
    }
    int cpus = positive_int(env, "SLURM_CPUS_PER_TASK");
    if (cpus == 0) cpus = static_cast<int>(launch.cpus_per_process);
    if (cpus == 0) {
      int node_cpus = positive_int(env, "SLURM_CPUS_ON_NODE");
      if (node_cpus == 0) node_cpus = host.cores;
      cpus = node_cpus / plan.ranks_per_node;
    }
    plan.cpus_per_rank = std::max(1, cpus);
    if (plan.ranks != launch.num_processes || plan.nodes != launch.num_machines) {
      plan.notes.push_back("the allocation has " + std::to_string(plan.ranks) + " tasks on " +
                           std::to_string(plan.nodes) + " node(s), [launch] says " +
                           std::to_string(launch.num_processes) + " on " +
                           std::to_string(launch.num_machines) + ": using the allocation");
    }
  } else {
    plan.nodes = static_cast<int>(launch.num_machines);
    plan.ranks = static_cast<int>(launch.num_processes);
    if (plan.ranks < plan.nodes) {
      throw UsageError("[launch] num_processes = " + std::to_string(plan.ranks) +
                       " is fewer than num_machines = " + std::to_string(plan.nodes) +
                       "; give at least one process per machine");
    }
    plan.ranks_per_node = ceil_div(plan.ranks, plan.nodes);
    int cores = std::max(1, host.cores);
    plan.cpus_per_rank = launch.cpus_per_process > 0 ? static_cast<int>(launch.cpus_per_process)
                                                     : std::max(1, cores / plan.ranks_per_node);
    plan.oversubscribed = plan.ranks_per_node * plan.cpus_per_rank > cores;
    if (plan.oversubscribed) {
      plan.notes.push_back(std::to_string(plan.ranks_per_node) + " ranks of " +
                           std::to_string(plan.cpus_per_rank) + " core(s) each on a node of " +
                           std::to_string(cores) + " cores: oversubscribed, ranks not bound");
    }
  }
  plan_omp_threads(plan, env);

  if (use_srun) {
    plan_srun(plan, request, tasks);
  } else {
    plan_mpirun(plan, request, env, host);
  }
  auto program = program_with_config(request);
  plan.argv.insert(plan.argv.end(), program.begin(), program.end());
  return plan;
}

std::string shell_quote(const std::string& word) {
  if (word.empty()) return "''";
  bool plain = std::all_of(word.begin(), word.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string("-_./=:,+@%").find(c) != std::string::npos;
  });
  if (plain) return word;
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string command_line(const LaunchPlan& plan) {
  std::string out;
  for (const auto& [name, value] : plan.env) out += name + "=" + shell_quote(value) + " ";
  for (size_t i = 0; i < plan.argv.size(); ++i) out += (i ? " " : "") + shell_quote(plan.argv[i]);
  return out;
}

std::vector<std::string> split_shell_words(const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (quote) {
      if (c == quote) {
        quote = 0;
      } else if (c == '\\' && quote == '"' && i + 1 < text.size()) {
        word += text[++i];
      } else {
        word += c;
      }
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == '\\' && i + 1 < text.size()) {
      word += text[++i];
      in_word = true;
    } else if (c == ' ' || c == '\t') {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (quote) throw UsageError("unterminated quote in launcher arguments '" + text + "'");
  if (in_word) words.push_back(word);
  return words;
}


}  // namespace mpiaccel::tool
