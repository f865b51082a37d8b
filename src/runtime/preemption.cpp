#include <atomic>
#include <csignal>

#include "mpiaccel/runtime.hpp"

namespace mpiaccel {
namespace {

// Written from a signal handler: only lock-free atomics are allowed there.
std::atomic<int> g_preemption_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void on_preemption_signal(int signal_number) {
  g_preemption_signal.store(signal_number, std::memory_order_relaxed);
}

}  // namespace

namespace detail {
// Installs the handlers that turn SIGUSR1 (Slurm's --signal=USR1@90) and SIGTERM
// (scancel, the end of a time limit, mpirun forwarding) into a flag the trainer
// reads at the next step boundary.
void install_preemption_handlers() {
  struct sigaction action {};
  action.sa_handler = on_preemption_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}
}  // namespace detail

bool preemption_requested() { return g_preemption_signal.load(std::memory_order_relaxed) != 0; }

}  // namespace mpiaccel
