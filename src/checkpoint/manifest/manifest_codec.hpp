#pragma once
// The manifest, shard records and the shard index as bytes, for messages
// between the ranks of one job (byte_codec.hpp: both ends run the same
// build). Decoding checks every count against the bytes left, so a damaged
// message is refused, never sized from.

#include <cstddef>
#include <string>
#include <vector>

#include "checkpoint/manifest/manifest.hpp"
#include "mpiaccel/checkpoint.hpp"

namespace mpiaccel::detail {

/// The manifest (for the load's broadcast) and back.
std::string encode_manifest(const CheckpointInfo& info);
CheckpointInfo decode_manifest(const std::string& bytes);

/// ShardRecords (for gathering them on rank 0) and back.
std::string encode_records(const std::vector<ShardRecord>& records);
std::vector<ShardRecord> decode_records(const std::string& bytes);

/// The shard index of a manifest of `tensors` tensors and back.
std::string encode_shard_index(const ShardIndex& index);
ShardIndex decode_shard_index(const std::string& bytes, size_t tensors);

}  // namespace mpiaccel::detail
