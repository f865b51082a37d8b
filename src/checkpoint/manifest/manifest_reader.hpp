#pragma once
// Reads and checks the manifest of a checkpoint file (manifest.hpp), in one
// process: rank 0 on load, which broadcasts it to the other ranks as bytes
// (H5Pset_all_coll_metadata_ops has no effect in HDF5 1.10.8, so N ranks
// reading it would be N times the metadata traffic), and `mpiaccel ckpt`.
// The format version decides how: version 1 has no /meta/shard_index (the
// whole shard table is read), version 2 has one (docs/checkpoint.md).

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/manifest/manifest.hpp"
#include "mpiaccel/checkpoint.hpp"
#include "runtime/h5_handle.hpp"

namespace mpiaccel::detail {

/// Opens `path` read-only with the serial (sec2) driver, with errors that say
/// what is wrong: missing, not HDF5, truncated.
H5Id open_checkpoint_file_serial(const std::string& path);
/// Checks the root attributes say this is an mpiaccel checkpoint of a format
/// version this build reads; throws naming `path` otherwise (for a newer
/// version: which mpiaccel wrote it, to load it with).
void check_format(hid_t file, const std::string& path);
/// Reads the whole manifest of an open checkpoint (check_format included) and
/// checks its completeness: every tensor of /meta/shards has its dataset,
/// and its shards tile its rows.
CheckpointInfo read_manifest(hid_t file, const std::string& path);

/// Version 2 and later: the manifest without the shard table, tensors (names
/// from each one's first table row, shapes, dtypes) with no shards, and
/// `index`: O(tensors) reads. Version 1: read_manifest's whole manifest, with
/// index->present false.
CheckpointInfo read_manifest_indexed(hid_t file, const std::string& path, ShardIndex* index);
/// Rows [first, first + count) of /meta/shards (an independent read with `dxpl`).
std::vector<ShardRecord> read_shard_rows(hid_t file, const std::string& path, int64_t first,
                                         int64_t count, hid_t dxpl);
/// Throws naming `path` unless t.shards (sorted by first_row) tile t's rows.
void check_shard_tiling(const std::string& path, const TensorInfo& t);

}  // namespace mpiaccel::detail
