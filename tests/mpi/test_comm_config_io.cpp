// ctest: links mpiaccel; np 1 2 3; timeout 60
// load_config: rank 0 reads, every rank parses the same bytes and ends with
// the same Config or the same error.
#define BOOST_TEST_MODULE comm_config_io
#include "support/mpi_test.hpp"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "mpiaccel/config_io.hpp"

namespace {

using mpiaccel::test::world;

// Only rank 0 writes (as on a cluster where only it may see the file); its
// path is sent to the others.
std::string write_on_rank0(const std::string& text) {
  std::string path;
  if (world().rank() == 0) {
    path = "/tmp/mpiaccel_test_comm_config_io_" + std::to_string(::getpid()) + ".ini";
    std::ofstream(path) << text;
  }
  return world().broadcast_bytes(path, 0);
}

template <typename F>
std::string config_error_of(F&& body) {
  try {
    body();
  } catch (const mpiaccel::ConfigError& e) {
    return e.message();
  }
  return "";
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_rank_gets_rank0s_file_with_overrides) {
  const std::string path =
      write_on_rank0("[distributed]\nstrategy = ddp\nseed = 7\n[ddp]\nbucket_cap_mb = 5\n");
  const mpiaccel::Config config = mpiaccel::load_config(world(), path, {"distributed.seed=9"});
  MPIACCEL_CHECK_ALL(config.distributed.strategy == mpiaccel::StrategyChoice::Ddp);
  MPIACCEL_CHECK_ALL(config.distributed.seed == 9);
  MPIACCEL_CHECK_ALL(config.ddp.bucket_cap_mb == 5);
  if (world().rank() == 0) std::remove(path.c_str());
}

BOOST_AUTO_TEST_CASE(missing_file_fails_every_rank_with_the_same_message) {
  const std::string message = config_error_of(
      [] { mpiaccel::load_config(world(), "/nonexistent/mpiaccel/run.ini", {}); });
  MPIACCEL_CHECK_ALL(message.find("config file '/nonexistent/mpiaccel/run.ini' not found") == 0);
  const auto all = world().all_gather_bytes(message);
  bool same = true;
  for (const auto& m : all) same = same && m == all.front();
  MPIACCEL_CHECK_ALL(same);
}

BOOST_AUTO_TEST_CASE(invalid_text_fails_every_rank_with_file_and_line) {
  const std::string path = write_on_rank0("[distributed]\nstrategy = ddp\nno_such_key = 1\n");
  const std::string message = config_error_of([&] { mpiaccel::load_config(world(), path, {}); });
  MPIACCEL_CHECK_ALL(message.find(path + ":3") != std::string::npos);
  MPIACCEL_CHECK_ALL(message.find("no_such_key") != std::string::npos);
  const std::string bad_override = config_error_of(
      [&] { mpiaccel::load_config(world(), path, {"distributed.strategy=warp"}); });
  MPIACCEL_CHECK_ALL(!bad_override.empty());
  if (world().rank() == 0) std::remove(path.c_str());
}
