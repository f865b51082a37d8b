#include "trainer/progress.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <string>

namespace mpiaccel::detail {
namespace {

bool is_terminal_path(const std::string& target) {
  return target.rfind("/dev/pts/", 0) == 0 || target.rfind("/dev/tty", 0) == 0;
}

// mpirun gives each rank a pseudo-terminal for stdout even when mpirun's own
// output goes to a file or a pipe, so isatty() alone would draw a progress bar
// into batch logs. A rank started by a local mpirun asks where its parent's
// stdout goes.
bool output_reaches_a_terminal() {
  if (!isatty(STDOUT_FILENO)) return false;
  char target[256] = {0};
  const std::string parent_stdout = "/proc/" + std::to_string(getppid()) + "/fd/1";
  ssize_t n = readlink(parent_stdout.c_str(), target, sizeof(target) - 1);
  if (n <= 0) return true;  // cannot tell: trust isatty
  return is_terminal_path(std::string(target, static_cast<size_t>(n)));
}

}  // namespace

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  auto total = static_cast<long long>(seconds + 0.5);
  char buf[32];
  if (total >= 3600)
    std::snprintf(buf, sizeof(buf), "%lldh%02lldm", total / 3600, total / 60 % 60);
  else if (total >= 60)
    std::snprintf(buf, sizeof(buf), "%lldm%02llds", total / 60, total % 60);
  else
    std::snprintf(buf, sizeof(buf), "%llds", total);
  return buf;
}

Progress::Progress(ProgressMode mode, bool enabled) {
  if (!enabled || mode == ProgressMode::Off) return;
  bool tty = output_reaches_a_terminal();
  bar_ = mode == ProgressMode::Bar || (mode == ProgressMode::Auto && tty);
  lines_ = !bar_;
}

void Progress::update(const ProgressState& s, bool log_line) {
  char stats[192];
  double eta = s.steps_per_s > 0 ? (s.max_steps - s.step) / s.steps_per_s : -1;
  std::snprintf(stats, sizeof(stats), "loss %.4f | lr %.2e | %.0f %s | %s elapsed | ETA %s", s.loss,
                s.lr, s.throughput, s.unit, format_duration(s.elapsed_s).c_str(),
                format_duration(eta).c_str());
  if (bar_) {
    const int width = 24;
    int filled = s.max_steps > 0 ? static_cast<int>(width * s.step / s.max_steps) : 0;
    std::string bar(static_cast<size_t>(filled), '=');
    if (filled < width) bar += '>' + std::string(static_cast<size_t>(width - filled - 1), ' ');
    std::printf("\r\033[K[%s] %lld/%lld | %s", bar.c_str(), static_cast<long long>(s.step),
                static_cast<long long>(s.max_steps), stats);
    std::fflush(stdout);
    bar_drawn_ = true;
  } else if (lines_ && log_line) {
    std::printf("step %lld/%lld | %s\n", static_cast<long long>(s.step),
                static_cast<long long>(s.max_steps), stats);
    std::fflush(stdout);
  }
}

void Progress::message(const std::string& text) {
  if (!bar_ && !lines_) return;
  if (bar_ && bar_drawn_) std::printf("\r\033[K");
  std::printf("%s\n", text.c_str());
  std::fflush(stdout);
}

void Progress::finish() {
  if (bar_ && bar_drawn_) std::printf("\n");
  std::fflush(stdout);
  bar_drawn_ = false;
}

}  // namespace mpiaccel::detail
