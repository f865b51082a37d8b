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

/// Writes /meta/shards (compound: name, rank, first_row, rows, crc32c). Every
/// rank calls it with the same `total` and `name_length`; `records` holds the
/// rows this rank writes (all of them on the one writer, none elsewhere).
/// Collective over the file's communicator.
void write_shard_table(hid_t meta_group, const std::vector<ShardRecord>& records, size_t total,
                       size_t name_length, hid_t dxpl);

/// The manifest as bytes (for a broadcast) and back.
std::string encode_manifest(const CheckpointInfo& info);
CheckpointInfo decode_manifest(const std::string& bytes);

/// Byte serialisation of ShardRecords (for gathering them on rank 0).
std::string encode_records(const std::vector<ShardRecord>& records);
std::vector<ShardRecord> decode_records(const std::string& bytes);

}  // namespace mpiaccel::detail
