#pragma once
// How one parameter's dim-0 rows are split over the ranks: torch.chunk
// semantics (chunk_row_range, as FSDP), so a rank's rows are contiguous in the
// parameter's memory and a state dict describes them directly. A 0-d
// parameter counts as one row (owned by rank 0).
//
// Flat buffers for the collectives use a rank-major layout: block r holds rank
// r's rows of every parameter of the bucket, one after the other. For the
// reduce-scatter every block is padded to the same size (each parameter gets
// ceil(rows / N) rows in every block, unused rows at the tail), so rank r
// receives exactly its rows; the all-gather uses exact (uneven) blocks.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "mpiaccel/state.hpp"

namespace mpiaccel::detail {

struct ParamShard {
  int64_t rows = 1;        ///< dim 0 (1 for a 0-d parameter)
  int64_t row_numel = 1;   ///< elements per row
  int64_t chunk_rows = 1;  ///< ceil(rows / N): the padded rows of every rank's slot
  std::vector<RowRange> ranges;  ///< per rank

  /// Elements of rank r's rows.
  int64_t numel(int rank) const { return ranges[rank].count * row_numel; }
  /// Elements of every rank's padded slot.
  int64_t padded_numel() const { return chunk_rows * row_numel; }
};

/// The split of `param` (contiguous) over `world` ranks.
ParamShard make_param_shard(const at::Tensor& param, int world);

/// Rank `rank`'s rows of `full` (a contiguous tensor shaped like the
/// parameter) as a flat view of numel(rank) elements.
at::Tensor flat_rows(const at::Tensor& full, const ParamShard& shard, int rank);

/// Rank `rank`'s rows of `full` as a plain alias (no autograd view tracking,
/// requires_grad false) shaped [count, full.sizes()[1:]...] ([1] or [0] for a
/// 0-d tensor): writing it writes `full`.
at::Tensor shard_view(const at::Tensor& full, const ParamShard& shard, int rank);

/// The shape of shard_view's result.
std::vector<int64_t> shard_shape(const at::Tensor& full, const ParamShard& shard, int rank);

}  // namespace mpiaccel::detail
