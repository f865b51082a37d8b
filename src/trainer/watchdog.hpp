#pragma once
// The per-rank hang watchdog: when this rank has made no progress (no new
// activity, see runtime/activity.hpp) for `timeout`, it logs where it is and
// aborts the job. It catches what the collectives' own deadlines cannot: a
// rank stuck outside any collective (I/O, an endless loop, a stalled device).

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace mpiaccel::detail {

class Watchdog {
 public:
  /// A timeout of zero disables it.
  explicit Watchdog(std::chrono::milliseconds timeout);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  void watch();

  std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace mpiaccel::detail
