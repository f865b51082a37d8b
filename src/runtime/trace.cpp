#include "runtime/trace.hpp"

#include <cstdio>

namespace mpiaccel::detail {
namespace {

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

const char* lane_name(TraceLane lane) {
  switch (lane) {
    case TraceLane::Compute: return "compute";
    case TraceLane::Communication: return "communication";
    case TraceLane::Io: return "checkpoint I/O";
  }
  return "?";
}

}  // namespace

Tracer& Tracer::instance() {
  static Tracer tracer;
  return tracer;
}

void Tracer::enable(Clock::time_point origin) {
  std::lock_guard<std::mutex> lock(mutex_);
  origin_ = origin;
  enabled_ = true;
}

void Tracer::record(std::string name, TraceLane lane, Clock::time_point start, Clock::time_point end) {
  if (!enabled_ || end < start) return;
  std::lock_guard<std::mutex> lock(mutex_);
  const double start_us = std::chrono::duration<double, std::micro>(start - origin_).count();
  const double duration_us = std::chrono::duration<double, std::micro>(end - start).count();
  spans_.push_back({std::move(name), lane, start_us, duration_us});
}

std::string Tracer::events_json(int rank) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out;
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                R"({"name": "process_name", "ph": "M", "pid": %d, "args": {"name": "rank %d"}})", rank, rank);
  out += buf;
  for (auto lane : {TraceLane::Compute, TraceLane::Communication, TraceLane::Io}) {
    std::snprintf(buf, sizeof(buf),
                  ",\n" R"({"name": "thread_name", "ph": "M", "pid": %d, "tid": %d, "args": {"name": "%s"}})",
                  rank, static_cast<int>(lane), lane_name(lane));
    out += buf;
  }
  for (const auto& span : spans_) {
    std::snprintf(buf, sizeof(buf),
                  ",\n" R"({"name": "%s", "ph": "X", "pid": %d, "tid": %d, "ts": %.1f, "dur": %.1f})",
                  escape(span.name).c_str(), rank, static_cast<int>(span.lane), span.start_us,
                  span.duration_us);
    out += buf;
  }
  return out;
}

}  // namespace mpiaccel::detail
