#pragma once
// Rank 0's view of a run: a progress bar when stdout is a terminal, plain
// periodic lines otherwise (batch jobs, pipes). [logging] progress =
// auto | bar | lines | off.

#include <cstdint>
#include <string>

#include "mpiaccel/config_choices.hpp"

namespace mpiaccel::detail {

struct ProgressState {
  int64_t step = 0;       ///< optimizer steps done
  int64_t max_steps = 0;
  double loss = 0;
  double lr = 0;
  double throughput = 0;  ///< units per second
  const char* unit = "tok/s";
  double elapsed_s = 0;
  double steps_per_s = 0;
};

class Progress {
 public:
  /// `mode` from [logging] progress; `enabled` false (ranks other than 0)
  /// prints nothing.
  Progress(ProgressMode mode, bool enabled);
  /// Called after every optimizer step; draws the bar, or prints a line when
  /// `log_line` is true in line mode.
  void update(const ProgressState& state, bool log_line);
  /// A message between bar updates (evaluation results, checkpoints).
  void message(const std::string& text);
  /// Ends the bar's line.
  void finish();

 private:
  bool bar_ = false;
  bool lines_ = false;
  bool bar_drawn_ = false;
};

std::string format_duration(double seconds);

}  // namespace mpiaccel::detail
