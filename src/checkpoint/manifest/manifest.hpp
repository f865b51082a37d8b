#pragma once
// The manifest of a checkpoint file: root attributes, /meta/shards, each
// tensor's shape and dtype, /meta/config, /trainer and the /optim attributes.
// This header holds what its three users share: the names of the file's
// objects, the format versions, and the shard record.
//   manifest_reader.hpp     reads and checks it (rank 0 on load, `mpiaccel ckpt`)
//   shard_table_writer.hpp  writes /meta/shards and /meta/shard_index (save)
//   manifest_codec.hpp      its bytes between ranks (load's broadcast, save's gathers)

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

#include "mpiaccel/checkpoint.hpp"

namespace mpiaccel::detail {

inline constexpr const char* kFormatName = "mpiaccel.checkpoint";
inline constexpr const char* kShardTablePath = "/meta/shards";
inline constexpr const char* kConfigPath = "/meta/config";
/// [tensors, 2] int64: each tensor's first row in /meta/shards and its count
/// (the table is sorted by tensor, in this order).
inline constexpr const char* kShardIndexPath = "/meta/shard_index";
/// The largest tensor a checkpoint may claim (256 TiB): a larger dataspace is
/// a damaged or hostile file, refused before anything is sized from it.
inline constexpr int64_t kMaxTensorBytes = int64_t{1} << 48;

/// The first format version with /meta/shard_index (docs/checkpoint.md,
/// "Format versions"). Version 1 files have none and are read the old way:
/// rank 0 reads the whole shard table. From version 2 on the index is part
/// of the file, and a file without it is damaged.
inline constexpr int kShardIndexFormatVersion = 2;
static_assert(kCheckpointFormatVersion >= kShardIndexFormatVersion,
              "saves write /meta/shard_index, so they write its format version");

/// One row of /meta/shards, as written.
struct ShardRecord {
  std::string name;
  int32_t rank = 0;
  int64_t first_row = 0;
  int64_t rows = 0;
  uint32_t crc32c = 0;
};

/// Where each tensor's rows of /meta/shards are, in CheckpointInfo::tensors order.
struct ShardIndex {
  bool present = false;  ///< false: a version 1 file, without /meta/shard_index (read whole)
  std::vector<int64_t> first, count;
};

/// Rows of dim 0 (a 0-d tensor has one).
inline int64_t row_count_of(const std::vector<int64_t>& shape) {
  return shape.empty() ? 1 : shape[0];
}

/// Bytes of one dim-0 row.
inline int64_t row_bytes_of(const std::vector<int64_t>& shape, at::ScalarType dtype) {
  int64_t n = static_cast<int64_t>(c10::elementSize(dtype));
  for (size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

/// "[2, 3]".
inline std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

}  // namespace mpiaccel::detail
