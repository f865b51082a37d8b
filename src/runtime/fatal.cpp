#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <thread>

#include "mpiaccel/error.hpp"
#include "mpiaccel/log.hpp"
#include "mpiaccel/runtime.hpp"
#include "runtime/peer_liveness.hpp"

namespace mpiaccel {

[[noreturn]] void fatal(const std::string& why, int status) {
  static std::atomic<bool> aborting{false};
  if (aborting.exchange(true)) {
    // Another thread is already taking the job down; MPI_Abort will end us too.
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  // A peer that died is the usual reason a collective broke: name it.
  const std::string lost = log_world_size() > 1 ? detail::describe_lost_peers() : "";
  log_error("fatal: " + why + (lost.empty() ? "" : "; " + lost) + " — aborting the job");
  // A moment for the other ranks' watchdogs and deadlines, which fire at
  // about the same time, to log where they are before MPI_Abort ends them.
  if (log_world_size() > 1) std::this_thread::sleep_for(std::chrono::seconds(1));
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, status);
  std::_Exit(status);
}

namespace detail {
// An exception that escapes main() on one rank would leave the others waiting in
// their next collective forever: turn it into a logged MPI_Abort instead.
void install_terminate_handler() {
  std::set_terminate([] {
    std::string why = "uncaught exception";
    if (auto current = std::current_exception()) {
      try {
        std::rethrow_exception(current);
      } catch (const std::exception& e) {
        why += ": ";
        why += e.what();
      } catch (...) {
        why += " of unknown type";
      }
    }
    fatal(why);
  });
}
}  // namespace detail

}  // namespace mpiaccel
