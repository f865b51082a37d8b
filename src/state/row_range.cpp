// Dim-0 row partitions shared by every strategy and the checkpoint reader, so
// a checkpoint written at one world size maps onto another by arithmetic only.

#include <algorithm>
#include <string>

#include "mpiaccel/error.hpp"
#include "mpiaccel/state.hpp"

namespace mpiaccel {
namespace {

void check_partition(int64_t rows, int parts, int index) {
  MPIACCEL_CHECK(rows >= 0, "row range: negative row count " + std::to_string(rows));
  MPIACCEL_CHECK(parts >= 1, "row range: parts must be >= 1, got " + std::to_string(parts));
  MPIACCEL_CHECK(index >= 0 && index < parts, "row range: part " + std::to_string(index) +
                                                  " outside [0, " + std::to_string(parts) + ")");
}

}  // namespace

RowRange even_row_range(int64_t rows, int parts, int index) {
  check_partition(rows, parts, index);
  const int64_t base = rows / parts;
  const int64_t extra = rows % parts;
  RowRange range;
  range.count = base + (index < extra ? 1 : 0);
  range.begin = index * base + std::min<int64_t>(index, extra);
  return range;
}

RowRange chunk_row_range(int64_t rows, int parts, int index) {
  check_partition(rows, parts, index);
  const int64_t chunk = (rows + parts - 1) / parts;
  RowRange range;
  range.begin = std::min<int64_t>(rows, chunk * index);
  range.count = std::min<int64_t>(rows, range.begin + chunk) - range.begin;
  return range;
}

}  // namespace mpiaccel
