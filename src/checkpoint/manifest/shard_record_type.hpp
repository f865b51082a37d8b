#pragma once
// The HDF5 compound type of a /meta/shards row (name, rank, first_row, rows,
// crc32c), as stored and as laid out in memory, and ShardRecord in and out of
// the memory layout: the one definition the table's reader and writer share.
// The name field is as long as the longest name + 1, so the types are made
// at run time.

#include <cstddef>

#include "checkpoint/manifest/manifest.hpp"
#include "runtime/h5_handle.hpp"

namespace mpiaccel::detail {

/// The row in memory; *record_size receives its size in bytes.
H5Id shard_memory_type(size_t name_length, size_t* record_size);
/// The row in the file: packed, little-endian.
H5Id shard_file_type(size_t name_length);

/// Writes `record` into `row` (record_size bytes of shard_memory_type,
/// zeroed: the name is NUL-padded).
void pack_shard_record(const ShardRecord& record, size_t name_length, unsigned char* row);
/// The record in `row` (a row of shard_memory_type).
ShardRecord unpack_shard_record(const unsigned char* row, size_t name_length);

}  // namespace mpiaccel::detail
