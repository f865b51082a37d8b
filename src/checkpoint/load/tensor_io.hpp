#pragma once
// Row-range reads of a tensor dataset and the CRC32C check of the saved
// shards a read covers; shared by the parallel load and the serial reader.
// Two read paths: HDF5 hyperslabs (any layout) and raw reads at the
// dataset's address (contiguous datasets, as mpiaccel writes them).

#include <ATen/core/Tensor.h>
#include <hdf5.h>

#include <string>
#include <vector>

#include "checkpoint/load/raw_reader.hpp"
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

/// The message for saved shard `s` of `info` whose bytes have CRC32C `crc`
/// instead of the recorded one.
std::string shard_damage(const TensorInfo& info, const ShardInfo& s, uint32_t crc,
                         const std::string& path);

/// Reads the whole saved shards covering rows [first_row, first_row + rows)
/// of tensor `info`, whose contiguous data starts at byte `data_offset` of the
/// file, in one stream through `reader`; checks every one of those shards'
/// CRC32C on the fly and copies rows [first_row, first_row + rows) into `out`
/// (the other rows are only checksummed). Returns "" or the first damage
/// message; throws when the read fails.
std::string read_rows_verified(RawReader& reader, int64_t data_offset, const TensorInfo& info,
                               int64_t first_row, int64_t rows, void* out,
                               const std::string& path);

/// For each tensor of `info` (in order), the file address of its data when
/// it can be read raw: a contiguous dataset, allocated, no external storage,
/// `bytes` long, elements of its dtype's size. -1 otherwise (a file rewritten
/// by another tool, e.g. chunked by h5repack): read it through HDF5.
std::vector<int64_t> raw_data_offsets(hid_t file, const CheckpointInfo& info);

/// A contiguous CPU tensor of rows [0, rows) of `info`'s shape and dtype.
at::Tensor empty_rows(const TensorInfo& info, int64_t rows);

}  // namespace mpiaccel::detail
