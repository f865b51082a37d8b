// Dim-0 row shards of a parameter (see shard_layout.hpp).

#include "state/shard_layout.hpp"

#include <ATen/ATen.h>
#include <ATen/core/LegacyTypeDispatch.h>

#include "mpiaccel/error.hpp"

namespace mpiaccel::detail {

ParamShard make_param_shard(const at::Tensor& param, int world) {
  MPIACCEL_CHECK(param.is_contiguous(),
                 "parameters must be contiguous to be sharded (their dim-0 rows are split in place)");
  ParamShard shard;
  shard.rows = param.dim() == 0 ? 1 : param.size(0);
  shard.row_numel = shard.rows == 0 ? 0 : param.numel() / shard.rows;
  shard.chunk_rows = (shard.rows + world - 1) / world;
  for (int r = 0; r < world; ++r) shard.ranges.push_back(chunk_row_range(shard.rows, world, r));
  return shard;
}

at::Tensor flat_rows(const at::Tensor& full, const ParamShard& shard, int rank) {
  return full.reshape({-1}).narrow(0, shard.ranges[rank].begin * shard.row_numel, shard.numel(rank));
}

std::vector<int64_t> shard_shape(const at::Tensor& full, const ParamShard& shard, int rank) {
  std::vector<int64_t> shape{shard.ranges[rank].count};
  for (int64_t d = 1; d < full.dim(); ++d) shape.push_back(full.size(d));
  return shape;
}

at::Tensor shard_view(const at::Tensor& full, const ParamShard& shard, int rank) {
  // Below the autograd view layer: a plain alias of the parameter's memory
  // that the optimizer can hold as a leaf and update in place.
  const at::Tensor base = full.detach();
  at::AutoDispatchBelowADInplaceOrView plain_views;
  const at::Tensor rows = base.dim() == 0 ? base.reshape({1}) : base;
  return rows.narrow(0, shard.ranges[rank].begin, shard.ranges[rank].count);
}

}  // namespace mpiaccel::detail
