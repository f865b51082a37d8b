#pragma once
// Where a unit's parameters sit in its flat communication buffers (FSDP2's
// copy-in / copy-out layout).
//
// Every parameter is cut along dim 0 with torch.chunk semantics
// (chunk_row_range): rank r holds rows [r·c, min((r+1)·c, R)), c = ceil(R/S),
// so the tail rank may hold fewer rows or none. A rank's BLOCK holds its piece
// of every parameter of the unit, each padded to c rows, one parameter after
// the other. A collective buffer is S blocks in rank order ([S, stride],
// stride ≥ block), so one all-gather or reduce-scatter moves the whole unit.
//
// Because the pieces are consecutive rows and the padding sits only after the
// last real row, a parameter's S padded pieces read in rank order are its
// full data followed by padding: packing and unpacking are two strided copies
// per parameter, whatever S.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "mpiaccel/state.hpp"

namespace mpiaccel::detail {

struct FlatSlot {
  std::vector<int64_t> shape;  ///< the full parameter's shape
  int64_t rows = 0;            ///< dim 0 (1 for a 0-d tensor)
  int64_t row_numel = 0;       ///< elements per row
  int64_t numel = 0;           ///< rows · row_numel
  int64_t chunk_numel = 0;     ///< c · row_numel: the padded piece of every rank
  int64_t offset = 0;          ///< of the piece inside a block
  RowRange local;              ///< this rank's rows
};

class FlatLayout {
 public:
  FlatLayout() = default;
  /// Slots for parameters of `shapes` split over `parts` ranks, this rank `index`.
  FlatLayout(const std::vector<std::vector<int64_t>>& shapes, int parts, int index);

  const std::vector<FlatSlot>& slots() const { return slots_; }
  int parts() const { return parts_; }
  /// Elements of one rank's block.
  int64_t block() const { return block_; }

  /// This rank's rows of parameter `i` inside `local` (a [block] tensor), shaped
  /// [rows, shape[1:]...] (for a 0-d parameter: [1] or [0]).
  at::Tensor shard_view(const at::Tensor& local, size_t i) const;

  /// Writes the full tensor `full` of parameter `i` into `buffer`, viewed as
  /// [parts, stride]: rank r's piece into block r, padding zeroed.
  void pack(const at::Tensor& buffer, int64_t stride, size_t i, const at::Tensor& full) const;
  /// The reverse: reads parameter `i` from `buffer` ([parts, stride]) into `full`.
  void unpack(const at::Tensor& buffer, int64_t stride, size_t i, const at::Tensor& full) const;

 private:
  std::vector<FlatSlot> slots_;
  int parts_ = 1;
  int64_t block_ = 0;
};

}  // namespace mpiaccel::detail
