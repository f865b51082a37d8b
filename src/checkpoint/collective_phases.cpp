#include "checkpoint/collective_phases.hpp"

#include <cstdio>

namespace mpiaccel::detail {

CollectivePhases::CollectivePhases(Communicator& comm)
    : comm_(comm), start_(Clock::now()), lap_start_(start_) {}

void CollectivePhases::agree(const std::string& context) {
  all_ok(comm_, ok(), context + error_);
}

double CollectivePhases::lap(const char* name) {
  const Clock::time_point now = Clock::now();
  const double seconds = std::chrono::duration<double>(now - lap_start_).count();
  lap_start_ = now;
  laps_.emplace_back(name, seconds);
  return seconds;
}

std::string CollectivePhases::laps_text() const {
  std::string text;
  for (const auto& [name, seconds] : laps_) {
    char number[32];
    std::snprintf(number, sizeof number, " %.3f", seconds);
    text += (text.empty() ? "" : ", ") + name + number;
  }
  return text;
}

double CollectivePhases::elapsed() const {
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

}  // namespace mpiaccel::detail
