#include "checkpoint/manifest/manifest_codec.hpp"

#include <map>

#include "checkpoint/manifest/byte_codec.hpp"
#include "checkpoint/hdf5/h5_types.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel::detail {

std::string encode_records(const std::vector<ShardRecord>& records) {
  ByteWriter w;
  w.u64(records.size());
  for (const auto& r : records) {
    w.str(r.name);
    w.i64(r.rank);
    w.i64(r.first_row);
    w.i64(r.rows);
    w.u64(r.crc32c);
  }
  return w.take();
}

std::vector<ShardRecord> decode_records(const std::string& bytes) {
  ByteReader r(bytes);
  std::vector<ShardRecord> records(r.count(40));
  for (auto& rec : records) {
    rec.name = r.str();
    rec.rank = static_cast<int32_t>(r.i64());
    rec.first_row = r.i64();
    rec.rows = r.i64();
    rec.crc32c = static_cast<uint32_t>(r.u64());
  }
  return records;
}

namespace {
void encode_map(ByteWriter& w, const std::map<std::string, std::string>& m) {
  w.u64(m.size());
  for (const auto& [k, v] : m) {
    w.str(k);
    w.str(v);
  }
}
std::map<std::string, std::string> decode_map(ByteReader& r) {
  std::map<std::string, std::string> m;
  for (size_t n = r.count(16); n > 0; --n) {
    std::string k = r.str();
    m[k] = r.str();
  }
  return m;
}
}  // namespace

std::string encode_manifest(const CheckpointInfo& info) {
  ByteWriter w;
  w.str(info.path);
  w.i64(info.format_version);
  w.i64(info.step);
  w.i64(info.world_size);
  w.str(info.strategy);
  w.str(info.mpiaccel_version);
  w.str(info.torch_version);
  w.str(info.created_utc);
  w.str(info.config_text);
  encode_map(w, info.trainer);
  encode_map(w, info.attributes);
  w.u64(info.tensors.size());
  for (const auto& t : info.tensors) {
    w.str(t.name);
    w.u64(t.shape.size());
    for (auto d : t.shape) w.i64(d);
    w.i64(static_cast<int64_t>(t.dtype));
    w.i64(t.bytes);
    w.u64(t.shards.size());
    for (const auto& s : t.shards) {
      w.i64(s.rank);
      w.i64(s.first_row);
      w.i64(s.rows);
      w.u64(s.crc32c);
    }
  }
  return w.take();
}

CheckpointInfo decode_manifest(const std::string& bytes) {
  ByteReader r(bytes);
  CheckpointInfo info;
  info.path = r.str();
  info.format_version = static_cast<int>(r.i64());
  info.step = r.i64();
  info.world_size = static_cast<int>(r.i64());
  info.strategy = r.str();
  info.mpiaccel_version = r.str();
  info.torch_version = r.str();
  info.created_utc = r.str();
  info.config_text = r.str();
  info.trainer = decode_map(r);
  info.attributes = decode_map(r);
  info.tensors.resize(r.count(40));
  for (auto& t : info.tensors) {
    t.name = r.str();
    t.shape.resize(r.count(8));
    for (auto& d : t.shape) d = r.i64();
    const int64_t dtype = r.i64();
    t.dtype = static_cast<at::ScalarType>(dtype);
    MPIACCEL_CHECK(dtype >= 0 && dtype < static_cast<int64_t>(at::ScalarType::NumOptions) &&
                       checkpoint_dtype_supported(t.dtype),
                   "checkpoint: damaged message between ranks (dtype " + std::to_string(dtype) + ")");
    t.bytes = r.i64();
    t.shards.resize(r.count(32));
    for (auto& s : t.shards) {
      s.rank = static_cast<int>(r.i64());
      s.first_row = r.i64();
      s.rows = r.i64();
      s.crc32c = static_cast<uint32_t>(r.u64());
    }
  }
  return info;
}

std::string encode_shard_index(const ShardIndex& index) {
  ByteWriter w;
  w.i64(index.present ? 1 : 0);
  for (size_t i = 0; i < index.first.size(); ++i) {
    w.i64(index.first[i]);
    w.i64(index.count[i]);
  }
  return w.take();
}

ShardIndex decode_shard_index(const std::string& bytes, size_t tensors) {
  ByteReader r(bytes);
  ShardIndex index;
  index.present = r.i64() != 0;
  if (index.present)
    for (size_t i = 0; i < tensors; ++i) {
      index.first.push_back(r.i64());
      index.count.push_back(r.i64());
    }
  return index;
}

}  // namespace mpiaccel::detail
