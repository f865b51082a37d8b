// ctest: links mpiaccel; np 1 2 3 4; timeout 60
#define BOOST_TEST_MODULE runtime_mpi
#include "support/mpi_test.hpp"

#include <cstdlib>
#include <string>

using mpiaccel::test::runtime;
using mpiaccel::test::world;

BOOST_AUTO_TEST_CASE(ranks_match_the_launcher) {
  const auto& rt = runtime();
  const auto& launch = rt.launch();
  // Under mpirun (how ctest runs this), MPI and the launcher agree.
  MPIACCEL_REQUIRE_ALL(launch.launcher == mpiaccel::Launcher::Mpirun);
  MPIACCEL_CHECK_ALL(launch.rank == rt.rank());
  MPIACCEL_CHECK_ALL(launch.size == rt.world_size());
  MPIACCEL_CHECK_ALL(launch.local_rank == rt.local_rank());
  MPIACCEL_CHECK_ALL(rt.world_size() == world().size());
}

BOOST_AUTO_TEST_CASE(one_node_here) {
  const auto& rt = runtime();
  MPIACCEL_CHECK_ALL(rt.node_count() == 1);
  MPIACCEL_CHECK_ALL(rt.node_rank() == 0);
  MPIACCEL_CHECK_ALL(rt.local_size() == rt.world_size());
  MPIACCEL_CHECK_ALL(rt.local_rank() == rt.rank());
}

BOOST_AUTO_TEST_CASE(cpu_device_without_gpus) {
  MPIACCEL_CHECK_ALL(runtime().device().device == "cpu");
}

BOOST_AUTO_TEST_CASE(unsafe_io_component_is_avoided) {
  const char* fcoll = std::getenv("OMPI_MCA_fcoll");
  MPIACCEL_CHECK_ALL(fcoll != nullptr && std::string(fcoll) == "dynamic_gen2");
}

BOOST_AUTO_TEST_CASE(log_identity_is_the_rank) {
  MPIACCEL_CHECK_ALL(mpiaccel::log_rank() == runtime().rank());
  MPIACCEL_CHECK_ALL(mpiaccel::log_world_size() == runtime().world_size());
}
