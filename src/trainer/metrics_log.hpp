#pragma once
// The JSONL metrics file of a run (docs/design.md, "Run outputs"): rank 0
// appends one JSON object per logged step.

#include <cstdint>
#include <cstdio>
#include <string>

#include "core/json_line.hpp"

namespace mpiaccel::detail {

class MetricsLog {
 public:
  /// Opens `path` for appending (creating its directory). An empty path or
  /// `enabled` false writes nothing.
  MetricsLog(const std::string& path, bool enabled);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  void write(const JsonLine& line);

  /// On a resume from step `step`: drops the lines of steps after it (what a
  /// crashed run trained and logged before the checkpoint it resumes from),
  /// so the file holds each kept step once. Rewritten through a .tmp and a
  /// rename; lines without a "step" stay.
  void forget_steps_after(int64_t step);

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace mpiaccel::detail
