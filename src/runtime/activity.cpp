#include "runtime/activity.hpp"

#include <mutex>

namespace mpiaccel::detail {
namespace {

struct Activity {
  std::mutex mutex;
  std::string what = "starting";
  std::chrono::steady_clock::time_point since = std::chrono::steady_clock::now();
};

Activity& activity() {
  static Activity a;
  return a;
}

}  // namespace

void set_activity(std::string what) {
  auto& a = activity();
  std::lock_guard<std::mutex> lock(a.mutex);
  a.what = std::move(what);
  a.since = std::chrono::steady_clock::now();
}

std::string current_activity() {
  auto& a = activity();
  std::lock_guard<std::mutex> lock(a.mutex);
  return a.what;
}

std::chrono::steady_clock::time_point last_progress() {
  auto& a = activity();
  std::lock_guard<std::mutex> lock(a.mutex);
  return a.since;
}

}  // namespace mpiaccel::detail
