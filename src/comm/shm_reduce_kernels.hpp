#pragma once
// Internal: the element-wise reduction of the shared-memory all-reduce.

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <vector>

#include "mpiaccel/comm.hpp"

namespace mpiaccel::detail {

/// outs[j][i] = op over k (in order) of sources[k][i], for i in [0, count)
/// and every j. Each element accumulates in at least float (bf16 and fp16
/// round once, at the end); Avg divides the sum by sources.size(). An output
/// may be one of the sources (each block is read before it is written).
/// Supported: float32, float64, bfloat16, float16.
void reduce_elementwise(const std::vector<void*>& outs, const std::vector<const void*>& sources,
                        int64_t count, at::ScalarType dtype, ReduceOp op);

/// Whether reduce_elementwise handles `dtype`.
bool reduce_elementwise_supports(at::ScalarType dtype);

}  // namespace mpiaccel::detail
