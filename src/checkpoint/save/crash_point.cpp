// Test crash points of the commit protocol (see crash_point.hpp).

#include "checkpoint/save/crash_point.hpp"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

namespace mpiaccel::detail {

void crash_point(const char* phase) {
  const char* wanted = std::getenv("MPIACCEL_CKPT_CRASH_AT");
  if (wanted == nullptr) return;
  const std::string spec = wanted;
  const size_t colon = spec.find(':');
  if (spec.compare(0, colon, phase) != 0) return;
  const long nth = colon == std::string::npos ? 1 : std::strtol(spec.c_str() + colon + 1, nullptr, 10);
  static std::mutex mutex;
  static std::map<std::string, long> reached;
  std::lock_guard<std::mutex> lock(mutex);
  if (++reached[phase] != nth) return;
  std::fprintf(stderr, "mpiaccel: crash point %s (MPIACCEL_CKPT_CRASH_AT=%s): SIGKILL\n", phase, wanted);
  std::fflush(stderr);
  ::kill(::getpid(), SIGKILL);
}

}  // namespace mpiaccel::detail
