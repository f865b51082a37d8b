// ctest: links mpiaccel; np 2 3; timeout 60
// A pre-emption notice as a loop of the user's own sees it (docs/api.md,
// `acc.preemption_agreed()`): real signals raised on some ranks, the flag set
// there by the handlers Runtime installs, and every rank agreeing to stop.
// Its own program: the flag is the process's, and a notice is not taken
// back, so one process gets one notice, as in a job.
#define BOOST_TEST_MODULE preemption
#include <csignal>

#include "mpiaccel/accelerator.hpp"
#include "mpiaccel/config.hpp"
#include "mpiaccel/runtime.hpp"
#include "support/mpi_test.hpp"

using mpiaccel::test::runtime;
using mpiaccel::test::world;

BOOST_AUTO_TEST_CASE(a_signal_on_some_ranks_stops_every_rank) {
  mpiaccel::test::require_world_size(2);
  mpiaccel::Config config;
  config.distributed.strategy = mpiaccel::StrategyChoice::Ddp;
  mpiaccel::Accelerator acc(runtime(), config);

  // No notice yet: every rank agrees to go on.
  MPIACCEL_CHECK_ALL(!mpiaccel::preemption_requested());
  MPIACCEL_CHECK_ALL(!acc.preemption_agreed());

  // Rank 0 gets nothing; odd ranks Slurm's SIGUSR1 (--signal=USR1@90), even
  // ranks SIGTERM (scancel, mpirun forwarding). raise() returns only after
  // the handler ran, so the flag is set when the check reads it.
  const int rank = world().rank();
  const int signal = rank == 0 ? 0 : (rank % 2 == 1 ? SIGUSR1 : SIGTERM);
  if (signal != 0) BOOST_REQUIRE(std::raise(signal) == 0);
  MPIACCEL_CHECK_ALL(mpiaccel::preemption_requested() == (signal != 0));

  // One all-reduce: rank 0, which got no signal, stops too, and so does
  // every later step boundary (the notice stays).
  MPIACCEL_CHECK_ALL(acc.preemption_agreed());
  MPIACCEL_CHECK_ALL(acc.preemption_agreed());
}
