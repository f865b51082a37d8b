#pragma once
// The save's writers of /meta/shards and /meta/shard_index. In a file opened
// over MPI-IO both are collective: every rank calls them with the same shape
// arguments and writes only its own part.

#include <hdf5.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "checkpoint/manifest/manifest.hpp"

namespace mpiaccel::detail {

/// Writes /meta/shards (compound: name, rank, first_row, rows, crc32c) of
/// `total` rows: every rank writes its own `records` at their table
/// `positions` (in tensor order: checkpoint_save's plan). Collective over
/// the file's communicator; every rank passes the same total and name_length.
void write_shard_table(hid_t meta_group, const std::vector<ShardRecord>& records,
                       const std::vector<int64_t>& positions, size_t total, size_t name_length,
                       hid_t dxpl);
/// Writes /meta/shard_index from the per-tensor record counts (in tensor
/// order); `writer` (one rank) supplies the data. Collective.
void write_shard_index(hid_t meta_group, const std::vector<int64_t>& counts, bool writer,
                       hid_t dxpl);

}  // namespace mpiaccel::detail
