#pragma once
// The zigzag layout's arithmetic (context_parallel.hpp): a sequence in
// 2·size chunks, rank r holding chunks r and 2·size−1−r.

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace mpiaccel::cp::detail {

/// The chunk `owner` holds as its half `half` (0: the early one, 1: the late one).
inline int64_t chunk_of(int64_t owner, int half, int64_t size) { return half == 0 ? owner : 2 * size - 1 - owner; }

/// The global positions of rank `rank`'s shard of `time` positions (2·size
/// must divide `time`), int64 on `options`' device.
at::Tensor rank_positions(int64_t time, int64_t rank, int64_t size, const at::TensorOptions& options);

}  // namespace mpiaccel::cp::detail
