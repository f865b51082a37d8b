// ctest: links mpiaccel_launch_plan; timeout 60
// The launch command `mpiaccel launch` builds, for synthetic environments: a
// workstation, an oversubscribed one, a Slurm allocation of 2 nodes × 4 tasks,
// a user's OMP_NUM_THREADS, NCCL variables, root, extra launcher arguments.
#define BOOST_TEST_MODULE launch
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "command.hpp"
#include "launch_plan.hpp"
#include "mpiaccel/config_files.hpp"

namespace {

using mpiaccel::LaunchConfig;
using mpiaccel::tool::command_line;
using mpiaccel::tool::HostFacts;
using mpiaccel::tool::LaunchPlan;
using mpiaccel::tool::LaunchRequest;
using mpiaccel::tool::plan_launch;
using Env = std::map<std::string, std::string>;

LaunchRequest request(int machines, int processes, std::vector<std::string> program = {"mpiaccel", "train"},
                      std::string config = "run.ini") {
  LaunchRequest r;
  r.launch.num_machines = machines;
  r.launch.num_processes = processes;
  if (!config.empty()) r.config_paths = {config};
  r.program = std::move(program);
  return r;
}

// True if `words` appear in argv as consecutive words.
bool has_words(const LaunchPlan& plan, const std::vector<std::string>& words) {
  return std::search(plan.argv.begin(), plan.argv.end(), words.begin(), words.end()) != plan.argv.end();
}

bool has(const LaunchPlan& plan, const std::string& word) { return has_words(plan, {word}); }

Env slurm_2x4() {
  return {{"SLURM_JOB_ID", "4242"},      {"SLURM_JOB_NUM_NODES", "2"}, {"SLURM_NNODES", "2"},
          {"SLURM_TASKS_PER_NODE", "4(x2)"}, {"SLURM_NTASKS", "8"},     {"SLURM_CPUS_PER_TASK", "8"},
          {"SLURM_CPUS_ON_NODE", "32"}};
}

}  // namespace

BOOST_AUTO_TEST_CASE(workstation_one_node_binds_cores_and_passes_the_config) {
  auto plan = plan_launch(request(1, 4), {}, HostFacts{16, false});
  BOOST_TEST(command_line(plan) ==
             "mpirun -np 4 --map-by ppr:4:node:PE=4 --bind-to core -x OMP_NUM_THREADS=4 "
             "mpiaccel train --config run.ini");
  BOOST_TEST((plan.launcher == mpiaccel::LauncherChoice::Mpirun));
  BOOST_TEST(plan.cpus_per_rank == 4);
  BOOST_TEST(plan.omp_threads == 4);
  BOOST_TEST(!plan.oversubscribed);
  BOOST_TEST(plan.notes.empty());
  BOOST_TEST(plan.env.empty());
}

BOOST_AUTO_TEST_CASE(cores_not_divisible_round_down_and_never_reach_zero) {
  auto plan = plan_launch(request(1, 3), {}, HostFacts{8, false});
  BOOST_TEST(plan.cpus_per_rank == 2);
  BOOST_TEST(has_words(plan, {"--map-by", "ppr:3:node:PE=2"}));
  auto many = plan_launch(request(1, 8), {}, HostFacts{8, false});
  BOOST_TEST(many.cpus_per_rank == 1);
  BOOST_TEST(!many.oversubscribed);
  BOOST_TEST(has_words(many, {"-x", "OMP_NUM_THREADS=1"}));
}

BOOST_AUTO_TEST_CASE(more_ranks_than_cores_oversubscribe_without_binding) {
  auto plan = plan_launch(request(1, 4), {}, HostFacts{2, true});
  BOOST_TEST(command_line(plan) ==
             "mpirun -np 4 --allow-run-as-root --oversubscribe --map-by ppr:4:node --bind-to none "
             "-x OMP_NUM_THREADS=1 mpiaccel train --config run.ini");
  BOOST_TEST(plan.oversubscribed);
  BOOST_TEST(plan.notes.size() == 1u);
}

BOOST_AUTO_TEST_CASE(cpus_per_process_beyond_the_node_is_oversubscription) {
  auto r = request(1, 2);
  r.launch.cpus_per_process = 6;
  auto plan = plan_launch(r, {}, HostFacts{8, false});
  BOOST_TEST(plan.oversubscribed);
  BOOST_TEST(has_words(plan, {"--bind-to", "none"}));
  BOOST_TEST(plan.omp_threads == 6);
  r.launch.cpus_per_process = 3;
  auto fits = plan_launch(r, {}, HostFacts{8, false});
  BOOST_TEST(has_words(fits, {"--map-by", "ppr:2:node:PE=3", "--bind-to", "core"}));
}

BOOST_AUTO_TEST_CASE(user_omp_num_threads_wins) {
  auto plan = plan_launch(request(1, 2), {{"OMP_NUM_THREADS", "3"}}, HostFacts{16, false});
  BOOST_TEST(plan.cpus_per_rank == 8);
  BOOST_TEST(plan.omp_threads == 3);
  BOOST_TEST(has_words(plan, {"-x", "OMP_NUM_THREADS=3"}));
  // Not a positive number: ignored, as OpenMP would.
  auto bad = plan_launch(request(1, 2), {{"OMP_NUM_THREADS", "lots"}}, HostFacts{16, false});
  BOOST_TEST(bad.omp_threads == 8);
}

BOOST_AUTO_TEST_CASE(nccl_and_mpiaccel_variables_are_forwarded_by_name) {
  Env env = {{"NCCL_DEBUG", "INFO"},  {"NCCL_SOCKET_IFNAME", "ib0"}, {"MPIACCEL_TRACE", "x"},
             {"HOME", "/root"},       {"NCCLX", "no"},              {"PATH", "/usr/bin"}};
  auto plan = plan_launch(request(1, 2), env, HostFacts{4, false});
  BOOST_TEST(has_words(plan, {"-x", "NCCL_DEBUG"}));
  BOOST_TEST(has_words(plan, {"-x", "NCCL_SOCKET_IFNAME"}));
  BOOST_TEST(has_words(plan, {"-x", "MPIACCEL_TRACE"}));
  BOOST_TEST(!has(plan, "HOME"));
  BOOST_TEST(!has(plan, "NCCLX"));
  BOOST_TEST(!has(plan, "PATH"));
}

BOOST_AUTO_TEST_CASE(slurm_two_nodes_by_four_tasks_use_srun_with_the_allocation) {
  auto plan = plan_launch(request(1, 1), slurm_2x4(), HostFacts{4, true});
  BOOST_TEST(command_line(plan) ==
             "OMP_NUM_THREADS=8 srun --mpi=pmix --nodes=2 --ntasks-per-node=4 --cpus-per-task=8 "
             "--cpu-bind=cores -K1 mpiaccel train --config run.ini");
  BOOST_TEST(plan.in_allocation);
  BOOST_TEST((plan.launcher == mpiaccel::LauncherChoice::Srun));
  BOOST_TEST(plan.ranks == 8);
  BOOST_TEST(plan.nodes == 2);
  // The config said 1 rank: the allocation wins, and the user is told.
  BOOST_TEST(plan.notes.size() == 1u);
  auto matching = plan_launch(request(2, 8), slurm_2x4(), HostFacts{4, true});
  BOOST_TEST(matching.notes.empty());
  BOOST_TEST(!has(matching, "--allow-run-as-root"));
}

BOOST_AUTO_TEST_CASE(slurm_shape_from_ntasks_per_node_and_cpus_on_node) {
  Env env = {{"SLURM_JOB_ID", "7"}, {"SLURM_NNODES", "3"}, {"SLURM_NTASKS_PER_NODE", "2"},
             {"SLURM_TASKS_PER_NODE", "2(x3)"}, {"SLURM_CPUS_ON_NODE", "12"}};
  auto plan = plan_launch(request(3, 6), env, HostFacts{64, false});
  BOOST_TEST(plan.ranks == 6);
  BOOST_TEST(plan.cpus_per_rank == 6);  // 12 cpus of the node / 2 tasks
  BOOST_TEST(has(plan, "--ntasks-per-node=2"));
  BOOST_TEST(has(plan, "--cpus-per-task=6"));
}

BOOST_AUTO_TEST_CASE(slurm_uneven_tasks_give_the_total) {
  Env env = {{"SLURM_JOB_ID", "7"}, {"SLURM_JOB_NUM_NODES", "3"}, {"SLURM_TASKS_PER_NODE", "4(x2),2"},
             {"SLURM_CPUS_PER_TASK", "1"}};
  auto plan = plan_launch(request(3, 10), env, HostFacts{4, false});
  BOOST_TEST(plan.ranks == 10);
  BOOST_TEST(plan.ranks_per_node == 4);
  BOOST_TEST(has(plan, "--ntasks=10"));
  BOOST_TEST(!has(plan, "--ntasks-per-node=4"));
}

BOOST_AUTO_TEST_CASE(mpirun_inside_an_allocation_takes_its_shape) {
  auto r = request(2, 8);
  r.launch.launcher = mpiaccel::LauncherChoice::Mpirun;
  auto plan = plan_launch(r, slurm_2x4(), HostFacts{4, false});
  BOOST_TEST((plan.launcher == mpiaccel::LauncherChoice::Mpirun));
  BOOST_TEST(has_words(plan, {"mpirun", "-np", "8", "--map-by", "ppr:4:node:PE=8", "--bind-to", "core"}));
  BOOST_TEST(has_words(plan, {"-x", "OMP_NUM_THREADS=8"}));
  // Slurm knows the hosts: no hostfile note.
  BOOST_TEST(plan.notes.empty());
}

BOOST_AUTO_TEST_CASE(several_machines_outside_slurm_need_hosts) {
  auto plan = plan_launch(request(2, 8), {}, HostFacts{4, false});
  BOOST_TEST(has(plan, "ppr:4:node:PE=1"));
  BOOST_TEST(plan.notes.size() == 1u);
  BOOST_TEST(plan.notes.front().find("hostfile") != std::string::npos);
  auto r = request(2, 8);
  r.launch.mpirun_args = "--hostfile hosts.txt";
  BOOST_TEST(plan_launch(r, {}, HostFacts{4, false}).notes.empty());
  BOOST_CHECK_THROW(plan_launch(request(4, 2), {}, HostFacts{4, false}), mpiaccel::tool::UsageError);
}

BOOST_AUTO_TEST_CASE(user_launcher_arguments_replace_ours) {
  auto r = request(1, 2);
  r.launch.mpirun_args = "--map-by socket --report-bindings --mca btl '^openib'";
  auto plan = plan_launch(r, {}, HostFacts{8, false});
  BOOST_TEST(!has(plan, "ppr:2:node:PE=4"));
  BOOST_TEST(!has(plan, "--bind-to"));
  BOOST_TEST(has_words(plan, {"--map-by", "socket", "--report-bindings", "--mca", "btl", "^openib"}));
  BOOST_TEST(command_line(plan).find("'^openib'") != std::string::npos);

  auto s = request(2, 8);
  s.launch.srun_args = "--cpu-bind=verbose,cores --mpi=pmi2";
  auto srun = plan_launch(s, slurm_2x4(), HostFacts{4, false});
  BOOST_TEST(!has(srun, "--mpi=pmix"));
  BOOST_TEST(!has(srun, "--cpu-bind=cores"));
  BOOST_TEST(has(srun, "--cpu-bind=verbose,cores"));
  BOOST_TEST(has(srun, "-K1"));
}

BOOST_AUTO_TEST_CASE(the_configs_are_passed_to_mpiaccel_train_before_its_own) {
  auto given = plan_launch(request(1, 1, {"mpiaccel", "train", "--config=other.ini"}), {}, HostFacts{});
  BOOST_TEST(has_words(given, {"mpiaccel", "train", "--config", "run.ini", "--config=other.ini"}));
  auto defaults = request(1, 1, {"mpiaccel", "train", "--config=other.ini"});
  defaults.config_is_default = true;
  BOOST_TEST(plan_launch(defaults, {}, HostFacts{}).argv.back() == "--config=other.ini");
  auto other = plan_launch(request(1, 1, {"./my_trainer", "train"}), {}, HostFacts{});
  BOOST_TEST(other.argv.back() == "train");
  auto env = plan_launch(request(1, 1, {"/opt/bin/mpiaccel", "env"}), {}, HostFacts{});
  BOOST_TEST(env.argv.back() == "env");
  auto path = plan_launch(request(1, 1, {"/opt/bin/mpiaccel", "train", "x=1"}), {}, HostFacts{});
  BOOST_TEST(has_words(path, {"/opt/bin/mpiaccel", "train", "--config", "run.ini", "x=1"}));
  auto none = plan_launch(request(1, 1, {"mpiaccel", "train"}, ""), {}, HostFacts{});
  BOOST_TEST(none.argv.back() == "train");
}

BOOST_AUTO_TEST_CASE(shell_quoting_and_splitting_round_trip) {
  using mpiaccel::tool::shell_quote;
  using mpiaccel::tool::split_shell_words;
  BOOST_TEST(shell_quote("ppr:4:node:PE=2") == "ppr:4:node:PE=2");
  BOOST_TEST(shell_quote("a b") == "'a b'");
  BOOST_TEST(shell_quote("it's") == "'it'\\''s'");
  BOOST_TEST(shell_quote("") == "''");
  auto words = split_shell_words("  -x 'A B' \"c \\\"d\\\"\" e\\ f  ");
  BOOST_TEST(words == (std::vector<std::string>{"-x", "A B", "c \"d\"", "e f"}));
  BOOST_CHECK_THROW(split_shell_words("--mca 'btl"), mpiaccel::tool::UsageError);
}

BOOST_AUTO_TEST_CASE(slurm_compressed_counts) {
  using mpiaccel::tool::expand_slurm_counts;
  BOOST_TEST(expand_slurm_counts("4(x2)") == (std::vector<int>{4, 4}));
  BOOST_TEST(expand_slurm_counts("2(x3),1") == (std::vector<int>{2, 2, 2, 1}));
  BOOST_TEST(expand_slurm_counts("8") == (std::vector<int>{8}));
  for (const char* bad : {"", "x", "4(x)", "4(2)", "4,", "0", "4(x2"}) {
    BOOST_CHECK_THROW(expand_slurm_counts(bad), mpiaccel::tool::UsageError);
  }
}

BOOST_AUTO_TEST_CASE(default_config_path_follows_xdg) {
  using mpiaccel::default_config_path;
  BOOST_TEST(default_config_path({{"XDG_CONFIG_HOME", "/x"}, {"HOME", "/h"}}) == "/x/mpiaccel/default.ini");
  BOOST_TEST(default_config_path({{"XDG_CONFIG_HOME", ""}, {"HOME", "/h"}}) ==
             "/h/.config/mpiaccel/default.ini");
  BOOST_TEST(default_config_path({}) == "");
}
