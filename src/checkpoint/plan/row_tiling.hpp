#pragma once
// Whether row ranges tile a tensor's rows [0, rows) exactly: the one walk
// behind the save's check of what the ranks hold (shard_plan.cpp) and the
// load's check of a file's /meta/shards (manifest_reader.cpp), each of which words
// its own error.

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace mpiaccel::detail {

struct TilingFault {
  enum Kind { kNone, kOverlap, kHole } kind = kNone;
  int64_t begin = 0, end = 0;  ///< the rows in two ranges (kOverlap) or in none (kHole)
  size_t range = 0;            ///< the range where it was found (ranges.size() for the tail)
};

/// The first fault of `ranges` ({first_row, rows}, sorted by first_row)
/// as a tiling of [0, rows), or kind kNone.
inline TilingFault find_tiling_fault(const std::vector<std::pair<int64_t, int64_t>>& ranges,
                                     int64_t rows) {
  int64_t next = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    const auto [first, count] = ranges[i];
    if (first < next) return {TilingFault::kOverlap, first, next, i};
    if (first > next) return {TilingFault::kHole, next, first, i};
    next = first + count;
  }
  if (next != rows) return {next < rows ? TilingFault::kHole : TilingFault::kOverlap,
                            std::min(next, rows), std::max(next, rows), ranges.size()};
  return {};
}

}  // namespace mpiaccel::detail
