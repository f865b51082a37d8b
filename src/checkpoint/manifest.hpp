#pragma once
// The manifest of a checkpoint file: root attributes, /meta/shards, each
// tensor's shape and dtype, /meta/config, /trainer and the /optim attributes.
// Read by one process (rank 0 on load, the `mpiaccel ckpt` tool) and, on load,
// broadcast to the other ranks as bytes (H5Pset_all_coll_metadata_ops has no
// effect in HDF5 1.10.8, so N ranks reading it would be N times the metadata
// traffic).

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/h5_handle.hpp"
#include "mpiaccel/checkpoint.hpp"

namespace mpiaccel::detail {

inline constexpr const char* kFormatName = "mpiaccel.checkpoint";
inline constexpr const char* kShardTablePath = "/meta/shards";
inline constexpr const char* kConfigPath = "/meta/config";
/// [tensors, 2] int64: each tensor's first row in /meta/shards and its count
/// (the table is sorted by tensor, in this order). Written since the shard
/// table is written by every rank; older files have no index.
/// The largest tensor a checkpoint may claim (256 TiB): a larger dataspace is
/// a damaged or hostile file, refused before anything is sized from it.
inline constexpr int64_t kMaxTensorBytes = int64_t{1} << 48;
inline constexpr const char* kShardIndexPath = "/meta/shard_index";

/// One row of /meta/shards, as written.
struct ShardRecord {
  std::string name;
  int32_t rank = 0;
  int64_t first_row = 0;
  int64_t rows = 0;
  uint32_t crc32c = 0;
};

/// Rows of dim 0 (a 0-d tensor has one).
int64_t row_count_of(const std::vector<int64_t>& shape);
/// Bytes of one dim-0 row.
int64_t row_bytes_of(const std::vector<int64_t>& shape, at::ScalarType dtype);
std::string shape_text(const std::vector<int64_t>& shape);

/// Opens `path` read-only with the serial (sec2) driver, with errors that say
/// what is wrong: missing, not HDF5, truncated.
H5Id open_checkpoint_file_serial(const std::string& path);
/// Checks the root attributes say this is an mpiaccel checkpoint of a format
/// version this build reads; throws naming `path` otherwise.
void check_format(hid_t file, const std::string& path);
/// Reads the whole manifest of an open checkpoint (check_format included) and
/// checks its completeness: every tensor of /meta/shards has its dataset,
/// and its shards tile its rows.
CheckpointInfo read_manifest(hid_t file, const std::string& path);

/// Where each tensor's rows of /meta/shards are, in CheckpointInfo::tensors order.
struct ShardIndex {
  bool present = false;  ///< false: a file without /meta/shard_index (read whole)
  std::vector<int64_t> first, count;
};

/// The manifest without the shard table when the file has /meta/shard_index:
/// tensors (names from each one's first table row, shapes, dtypes) with no
/// shards, and `index`: O(tensors) reads. Otherwise read_manifest's whole
/// manifest, with index->present false.
CheckpointInfo read_manifest_indexed(hid_t file, const std::string& path, ShardIndex* index);
/// Rows [first, first + count) of /meta/shards (an independent read with `dxpl`).
std::vector<ShardRecord> read_shard_rows(hid_t file, const std::string& path, int64_t first,
                                         int64_t count, hid_t dxpl);
/// Throws naming `path` unless t.shards (sorted by first_row) tile t's rows.
void check_shard_tiling(const std::string& path, const TensorInfo& t);

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

/// The manifest as bytes (for a broadcast) and back.
std::string encode_manifest(const CheckpointInfo& info);
CheckpointInfo decode_manifest(const std::string& bytes);

/// Byte serialisation of ShardRecords (for gathering them on rank 0).
std::string encode_records(const std::vector<ShardRecord>& records);
std::vector<ShardRecord> decode_records(const std::string& bytes);

}  // namespace mpiaccel::detail
