// ctest: links mpiaccel; timeout 60
#define BOOST_TEST_MODULE runtime
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <cstdio>
#include <string>

#include "mpiaccel/error.hpp"
#include "mpiaccel/log.hpp"
#include "mpiaccel/runtime.hpp"

using mpiaccel::choose_device;
using mpiaccel::Launcher;
using mpiaccel::launcher_name;
using mpiaccel::LaunchEnvironment;

BOOST_AUTO_TEST_CASE(no_launcher_is_a_singleton) {
  auto env = LaunchEnvironment::from({{"HOME", "/root"}});
  BOOST_TEST(std::string(launcher_name(env.launcher)) == launcher_name(Launcher::Singleton));
  BOOST_TEST(env.rank == -1);
  BOOST_TEST(env.size == -1);
}

BOOST_AUTO_TEST_CASE(mpirun_variables) {
  auto env = LaunchEnvironment::from({{"OMPI_COMM_WORLD_RANK", "5"},
                                      {"OMPI_COMM_WORLD_SIZE", "8"},
                                      {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                      {"OMPI_COMM_WORLD_NODE_RANK", "2"}});
  BOOST_TEST(std::string(launcher_name(env.launcher)) == launcher_name(Launcher::Mpirun));
  BOOST_TEST(env.rank == 5);
  BOOST_TEST(env.size == 8);
  BOOST_TEST(env.local_rank == 1);
  BOOST_TEST(env.node_rank == 2);
}

BOOST_AUTO_TEST_CASE(srun_variables) {
  auto env = LaunchEnvironment::from({{"SLURM_JOB_ID", "991"},
                                      {"SLURM_STEP_ID", "0"},
                                      {"SLURM_PROCID", "6"},
                                      {"SLURM_NTASKS", "8"},
                                      {"SLURM_LOCALID", "2"},
                                      {"SLURM_NODEID", "1"},
                                      {"SLURM_STEP_TASKS_PER_NODE", "4(x2)"}});
  BOOST_TEST(std::string(launcher_name(env.launcher)) == launcher_name(Launcher::Srun));
  BOOST_TEST(env.rank == 6);
  BOOST_TEST(env.size == 8);
  BOOST_TEST(env.local_rank == 2);
  BOOST_TEST(env.node_rank == 1);
  BOOST_TEST(env.slurm_job_id == "991");
  BOOST_TEST(env.tasks_per_node == "4(x2)");
}

BOOST_AUTO_TEST_CASE(mpirun_inside_a_slurm_allocation_is_mpirun) {
  // The batch shell has SLURM_JOB_ID (and may have SLURM_PROCID); mpirun
  // started the ranks, so its variables decide.
  auto env = LaunchEnvironment::from({{"SLURM_JOB_ID", "42"},
                                      {"SLURM_PROCID", "0"},
                                      {"OMPI_COMM_WORLD_RANK", "3"},
                                      {"OMPI_COMM_WORLD_SIZE", "4"}});
  BOOST_TEST(std::string(launcher_name(env.launcher)) == launcher_name(Launcher::Mpirun));
  BOOST_TEST(env.rank == 3);
  BOOST_TEST(env.slurm_job_id == "42");
}

BOOST_AUTO_TEST_CASE(batch_shell_without_step_is_not_srun) {
  auto env = LaunchEnvironment::from({{"SLURM_JOB_ID", "42"}, {"SLURM_NTASKS", "8"}});
  BOOST_TEST(std::string(launcher_name(env.launcher)) == launcher_name(Launcher::Singleton));
}

BOOST_AUTO_TEST_CASE(other_pmi) {
  auto env = LaunchEnvironment::from({{"PMI_RANK", "2"}, {"PMI_SIZE", "3"}});
  BOOST_TEST(std::string(launcher_name(env.launcher)) == launcher_name(Launcher::OtherPmi));
  BOOST_TEST(env.rank == 2);
  BOOST_TEST(env.size == 3);
}

BOOST_AUTO_TEST_CASE(malformed_numbers_read_as_unset) {
  auto env = LaunchEnvironment::from({{"OMPI_COMM_WORLD_RANK", "x1"}, {"OMPI_COMM_WORLD_SIZE", ""}});
  BOOST_TEST(std::string(launcher_name(env.launcher)) == launcher_name(Launcher::Mpirun));
  BOOST_TEST(env.rank == -1);
  BOOST_TEST(env.size == -1);
}

BOOST_AUTO_TEST_CASE(device_is_cpu_without_gpus) {
  auto d = choose_device(3, 4, 0, false);
  BOOST_TEST(d.device == "cpu");
  BOOST_TEST(d.cuda_index == -1);
}

BOOST_AUTO_TEST_CASE(device_is_one_gpu_per_local_rank) {
  for (int local = 0; local < 4; ++local) {
    auto d = choose_device(local, 4, 4, false);
    BOOST_TEST(d.device == "cuda:" + std::to_string(local));
    BOOST_TEST(d.cuda_index == local);
  }
}

BOOST_AUTO_TEST_CASE(two_ranks_on_one_gpu_is_an_error_unless_allowed) {
  BOOST_CHECK_EXCEPTION(choose_device(1, 2, 1, false), mpiaccel::Error,
                        [](const mpiaccel::Error& e) {
                          return e.message().find("allow_gpu_sharing") != std::string::npos;
                        });
  auto shared = choose_device(1, 2, 1, true);
  BOOST_TEST(shared.device == "cuda:0");
}

BOOST_AUTO_TEST_CASE(log_levels_parse) {
  BOOST_TEST(static_cast<int>(mpiaccel::choice_named<mpiaccel::LogLevel>("debug", "log level")) == 0);
  BOOST_TEST(static_cast<int>(mpiaccel::choice_named<mpiaccel::LogLevel>("error", "log level")) == 3);
  BOOST_CHECK_THROW(mpiaccel::choice_named<mpiaccel::LogLevel>("loud", "log level"), mpiaccel::Error);
}

namespace {
// What log() writes to stderr while `write` runs.
template <class Write>
std::string captured_stderr(Write write) {
  std::fflush(stderr);
  std::FILE* file = std::tmpfile();
  BOOST_TEST_REQUIRE(file != nullptr);
  const int saved = dup(STDERR_FILENO);
  dup2(fileno(file), STDERR_FILENO);
  write();
  std::fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  std::string text;
  std::rewind(file);
  for (int c; (c = std::fgetc(file)) != EOF;) text += static_cast<char>(c);
  std::fclose(file);
  return text;
}
}  // namespace

// A loop of the user's own reads log_level() to skip building a message the
// filter would drop: it must be the level log() filters by.
BOOST_AUTO_TEST_CASE(log_level_is_the_filter_of_log) {
  using mpiaccel::LogLevel;
  const LogLevel before = mpiaccel::log_level();
  for (const char* name : {"debug", "info", "warn", "error"}) {
    mpiaccel::set_log_level(mpiaccel::choice_named<mpiaccel::LogLevel>(name, "log level"));
    BOOST_CHECK(mpiaccel::log_level() == mpiaccel::choice_named<mpiaccel::LogLevel>(name, "log level"));
  }
  mpiaccel::set_log_level(mpiaccel::LogLevel::Warn);
  const std::string out = captured_stderr([] {
    for (LogLevel level : {mpiaccel::LogLevel::Debug, mpiaccel::LogLevel::Info, mpiaccel::LogLevel::Warn, mpiaccel::LogLevel::Error})
      if (mpiaccel::log_level() <= level) mpiaccel::log(level, "passes");
      else mpiaccel::log(level, "dropped");
  });
  mpiaccel::set_log_level(before);
  BOOST_TEST(out == "WARN passes\nERROR passes\n");
}
