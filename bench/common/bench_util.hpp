#pragma once
// Small helpers the benchmark programs share: wall-clock milliseconds, the
// median of a sample, this process's peak resident set and CPU time, the
// command-line walk and main()'s error report. Header-only so a benchmark
// needs no extra library; no LibTorch or MPI here.

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

namespace mpiaccel::bench {

using Clock = std::chrono::steady_clock;

/// `d` in milliseconds.
inline double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

/// The median of `values` (the mean of the middle two for an even count);
/// 0 for none. Benchmarks report medians: one slow step on a shared machine
/// moves the mean, not the median.
inline double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  const double upper = values[mid];
  if (values.size() % 2) return upper;
  const double lower = *std::max_element(values.begin(), values.begin() + mid);
  return 0.5 * (lower + upper);
}

/// The peak resident set of this process so far, in bytes (getrusage
/// ru_maxrss, which Linux reports in KiB).
inline int64_t peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;
}

/// CPU time of the whole process (every thread) so far, in milliseconds.
inline double process_cpu_ms() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const auto ms_of = [](const timeval& t) { return t.tv_sec * 1e3 + t.tv_usec * 1e-3; };
  return ms_of(usage.ru_utime) + ms_of(usage.ru_stime);
}

/// Walks a benchmark's command line: each `--name VALUE` goes to
/// `flag(name, value)`, which returns false for a name it does not know; each
/// `section.key=value` config override is appended to `overrides`. Anything
/// else, or a flag without its value, calls `usage(why)`, which must not
/// return.
template <typename Flag, typename Usage>
void parse_arguments(int argc, char** argv, Flag&& flag, std::vector<std::string>* overrides,
                     Usage&& usage) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--", 0) == 0) {
      if (i + 1 >= argc) usage(arg + " needs a value");
      if (!flag(arg, std::string(argv[++i]))) usage("unknown argument " + arg);
    } else if (arg.find('=') != std::string::npos) {
      overrides->push_back(arg);
    } else {
      usage("unknown argument " + arg);
    }
  }
}

/// A benchmark's main(): returns `run()`, or reports an exception as
/// "NAME: what" on stderr and returns 1.
template <typename Run>
int run_main(const char* name, Run&& run) {
  try {
    return run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return 1;
  }
}

}  // namespace mpiaccel::bench
