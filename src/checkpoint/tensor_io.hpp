#pragma once
// Row-range reads of a tensor dataset and the CRC32C check of the saved
// shards a read covers; shared by the parallel load and the serial reader.

#include <ATen/core/Tensor.h>
#include <hdf5.h>

#include <string>

#include "mpiaccel/checkpoint.hpp"

namespace mpiaccel::detail {

/// Reads rows [first_row, first_row + rows) of dataset `dset` (a tensor of
/// `info.shape`) into `out`, with the dataset's own type as the memory type
/// (exact bits). `dxpl` selects collective/independent transfer.
void read_rows(hid_t dset, const TensorInfo& info, int64_t first_row, int64_t rows, void* out,
               hid_t dxpl);

/// The range of whole saved shards that covers rows [first_row, first_row +
/// rows): [*lo, *hi). Rows outside the tensor throw.
void covering_shards(const TensorInfo& info, int64_t first_row, int64_t rows, int64_t* lo,
                     int64_t* hi);

/// Checks every saved shard lying wholly inside `buffer`, which holds rows
/// [buffer_first_row, buffer_first_row + buffer_rows). Returns "" when all
/// match, else a message naming the tensor, the rows and the writing rank.
std::string check_shard_crcs(const TensorInfo& info, const void* buffer, int64_t buffer_first_row,
                             int64_t buffer_rows, const std::string& path);

/// A contiguous CPU tensor of rows [0, rows) of `info`'s shape and dtype.
at::Tensor empty_rows(const TensorInfo& info, int64_t rows);

}  // namespace mpiaccel::detail
