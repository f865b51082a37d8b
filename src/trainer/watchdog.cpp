#include "trainer/watchdog.hpp"

#include <string>

#include "mpiaccel/runtime.hpp"
#include "runtime/activity.hpp"

namespace mpiaccel::detail {

Watchdog::Watchdog(std::chrono::milliseconds timeout) : timeout_(timeout) {
  if (timeout_.count() > 0) thread_ = std::thread([this] { watch(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::watch() {
  // Check a few times per timeout so an abort comes at most 25 % late.
  const auto period = std::max(std::chrono::milliseconds(50), timeout_ / 4);
  std::unique_lock<std::mutex> lock(mutex_);
  while (!cv_.wait_for(lock, period, [this] { return stop_; })) {
    const auto idle = std::chrono::steady_clock::now() - last_progress();
    if (idle < timeout_) continue;
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(idle).count();
    fatal("watchdog: this rank made no progress for " + std::to_string(seconds) + " s at: " +
          current_activity() + " (raise [distributed] timeout_s if this phase is legitimately this slow)");
  }
}

}  // namespace mpiaccel::detail
