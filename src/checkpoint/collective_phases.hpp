#pragma once
// The phases of a collective save or load. A step that one rank can fail
// alone (an open, a check, a write) must not throw on that rank only: the
// other ranks would wait in the next collective for ever. So a step runs with
// its error recorded instead of thrown, the rank goes on making the same
// collective calls as every other rank, and at the end of the phase the ranks
// agree (all_ok): every rank throws the same error, or none does. Each phase
// also records how long it took, for the debug log.

#include <chrono>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "mpiaccel/comm.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel::detail {

/// Runs `step` and returns its error message ("" if it succeeded) instead of
/// throwing it.
template <typename F>
std::string error_message_of(F&& step) {
  try {
    std::forward<F>(step)();
  } catch (const Error& e) {
    return e.message();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

class CollectivePhases {
 public:
  explicit CollectivePhases(Communicator& comm);

  /// Runs `step`, keeping its error (the first one of the phase) instead of
  /// throwing it. Local: no communication.
  template <typename F>
  void record(F&& step) {
    std::string message = error_message_of(std::forward<F>(step));
    if (error_.empty()) error_ = std::move(message);
  }

  /// Throws on every rank if any rank has recorded an error (all_ok), with
  /// `context` before this rank's message. Collective over comm.
  void agree(const std::string& context = "");

  /// A phase: record(step), then agree(). Collective over comm.
  template <typename F>
  void run(F&& step) {
    record(std::forward<F>(step));
    agree();
  }
  /// The same, and the time since the previous lap kept as lap `name`.
  template <typename F>
  void run(const char* name, F&& step) {
    run(std::forward<F>(step));
    lap(name);
  }

  /// Ends the lap `name`: the seconds since the previous lap (or the start).
  double lap(const char* name);
  /// "name seconds, ..." of every lap, in order ("prepare 0.001, agree 0.002").
  std::string laps_text() const;
  /// Seconds since the phases began.
  double elapsed() const;

  bool ok() const { return error_.empty(); }

 private:
  using Clock = std::chrono::steady_clock;

  Communicator& comm_;
  std::string error_;
  const Clock::time_point start_;
  Clock::time_point lap_start_;
  std::vector<std::pair<std::string, double>> laps_;
};

}  // namespace mpiaccel::detail
