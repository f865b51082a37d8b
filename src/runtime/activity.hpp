#pragma once
// What this rank is doing right now ("step 12: backward"), for the hang
// watchdog and for deadline messages, so that an abort says where every rank
// that could still act was. Setting an activity counts as progress.

#include <chrono>
#include <string>

namespace mpiaccel::detail {

void set_activity(std::string what);
std::string current_activity();
/// When set_activity was last called.
std::chrono::steady_clock::time_point last_progress();

}  // namespace mpiaccel::detail
