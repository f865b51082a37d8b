#pragma once
// The timeline trace ([logging] trace = FILE): each rank records spans
// (forward, backward, each bucket's or unit's communication, the optimizer
// step, checkpoint I/O); rank 0 merges them into one Chrome trace JSON that
// chrome://tracing and Perfetto open (Horovod's timeline, for our
// strategies). Off unless enabled; recording is a mutex-guarded append.

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

namespace mpiaccel::detail {

enum class TraceLane { Compute = 0, Communication = 1, Io = 2 };

class Tracer {
 public:
  using Clock = std::chrono::steady_clock;

  /// The process's tracer.
  static Tracer& instance();

  /// Starts recording; times are reported relative to `origin` (taken by
  /// every rank right after a barrier, so ranks line up).
  void enable(Clock::time_point origin);
  bool enabled() const { return enabled_; }

  void record(std::string name, TraceLane lane, Clock::time_point start, Clock::time_point end);

  /// This rank's events as Chrome trace event objects joined by ",\n"
  /// (pid = rank, tid = lane), plus the process and thread name metadata.
  std::string events_json(int rank) const;

 private:
  struct Span {
    std::string name;
    TraceLane lane;
    double start_us;
    double duration_us;
  };
  bool enabled_ = false;
  Clock::time_point origin_{};
  mutable std::mutex mutex_;
  std::vector<Span> spans_;
};

/// Records the span from its construction to its destruction (if tracing).
class TraceScope {
 public:
  TraceScope(const char* name, TraceLane lane = TraceLane::Compute)
      : name_(name), lane_(lane), start_(Tracer::Clock::now()) {}
  ~TraceScope() {
    auto& tracer = Tracer::instance();
    if (tracer.enabled()) tracer.record(name_, lane_, start_, Tracer::Clock::now());
  }
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  const char* name_;
  TraceLane lane_;
  Tracer::Clock::time_point start_;
};

}  // namespace mpiaccel::detail
