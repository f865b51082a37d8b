#include "checkpoint/load/tensor_io.hpp"

#include <ATen/ops/empty.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/crc32c.hpp"
#include "checkpoint/manifest/manifest.hpp"
#include "runtime/h5_handle.hpp"
#include "runtime/check_hdf5.hpp"

namespace mpiaccel::detail {

void read_rows(hid_t dset, const TensorInfo& info, int64_t first_row, int64_t rows, void* out,
               hid_t dxpl) {
  if (rows == 0 || info.bytes == 0) return;
  H5Id type(MPIACCEL_CHECK_HDF5(H5Dget_type(dset)));
  if (info.shape.empty()) {
    MPIACCEL_CHECK_HDF5(H5Dread(dset, type, H5S_ALL, H5S_ALL, dxpl, out));
    return;
  }
  H5Id file_space(MPIACCEL_CHECK_HDF5(H5Dget_space(dset)));
  std::vector<hsize_t> start(info.shape.size(), 0), count(info.shape.begin(), info.shape.end());
  start[0] = static_cast<hsize_t>(first_row);
  count[0] = static_cast<hsize_t>(rows);
  MPIACCEL_CHECK_HDF5(H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start.data(), nullptr,
                                          count.data(), nullptr));
  H5Id mem_space(MPIACCEL_CHECK_HDF5(
      H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr)));
  MPIACCEL_CHECK_HDF5(H5Dread(dset, type, mem_space, file_space, dxpl, out));
}

void covering_shards(const TensorInfo& info, int64_t first_row, int64_t rows, int64_t* lo,
                     int64_t* hi) {
  const int64_t end = first_row + rows;
  MPIACCEL_CHECK(first_row >= 0 && rows >= 0 && end <= row_count_of(info.shape),
                 "tensor " + info.name + ": rows [" + std::to_string(first_row) + ", " +
                     std::to_string(end) + ") outside its " +
                     std::to_string(row_count_of(info.shape)) + " rows");
  *lo = first_row;
  *hi = end;
  if (rows == 0) return;
  for (const auto& s : info.shards) {
    if (s.rows == 0 || s.first_row + s.rows <= first_row || s.first_row >= end) continue;
    *lo = std::min(*lo, s.first_row);
    *hi = std::max(*hi, s.first_row + s.rows);
  }
}

std::string check_shard_crcs(const TensorInfo& info, const void* buffer, int64_t buffer_first_row,
                             int64_t buffer_rows, const std::string& path) {
  const int64_t row_bytes = row_bytes_of(info.shape, info.dtype);
  const auto* base = static_cast<const unsigned char*>(buffer);
  for (const auto& s : info.shards) {
    if (s.rows == 0 || s.first_row < buffer_first_row ||
        s.first_row + s.rows > buffer_first_row + buffer_rows)
      continue;
    const uint32_t crc = crc32c(0, base + (s.first_row - buffer_first_row) * row_bytes,
                                static_cast<size_t>(s.rows * row_bytes));
    if (crc != s.crc32c) return shard_damage(info, s, crc, path);
  }
  return "";
}

std::string shard_damage(const TensorInfo& info, const ShardInfo& s, uint32_t crc,
                         const std::string& path) {
  char text[64];
  std::snprintf(text, sizeof text, "CRC32C 0x%08x, recorded 0x%08x", crc, s.crc32c);
  return "checkpoint " + path + " is damaged: tensor " + info.name + " rows [" +
         std::to_string(s.first_row) + ", " + std::to_string(s.first_row + s.rows) +
         ") saved by rank " + std::to_string(s.rank) + " fail their checksum (" + text + ")";
}

std::string read_rows_verified(RawReader& reader, int64_t data_offset, const TensorInfo& info,
                               int64_t first_row, int64_t rows, void* out,
                               const std::string& path) {
  if (rows == 0 || info.bytes == 0) return "";
  int64_t lo = 0, hi = 0;
  covering_shards(info, first_row, rows, &lo, &hi);
  const int64_t row_bytes = row_bytes_of(info.shape, info.dtype);
  std::vector<const ShardInfo*> shards;  // tiling [lo, hi) in order (checked by read_manifest)
  for (const auto& s : info.shards)
    if (s.rows > 0 && s.first_row >= lo && s.first_row + s.rows <= hi) shards.push_back(&s);
  MPIACCEL_CHECK(!shards.empty() && shards.front()->first_row == lo &&
                     shards.back()->first_row + shards.back()->rows == hi,
                 "checkpoint " + path + ": tensor " + info.name + ": the shard table does not "
                 "cover rows [" + std::to_string(lo) + ", " + std::to_string(hi) + ")");
  // Byte positions relative to row lo.
  const int64_t want_from = (first_row - lo) * row_bytes, want_to = want_from + rows * row_bytes;
  auto* to = static_cast<char*>(out);
  std::string damage;
  size_t k = 0;
  uint32_t crc = 0;
  int64_t pos = 0;
  // Per piece small enough to stay in the L2 cache: copy out the wanted
  // rows, then checksum the same bytes, advancing shard by shard.
  auto piece = [&](const char* data, int64_t n) {
    const int64_t c0 = std::max(pos, want_from), c1 = std::min(pos + n, want_to);
    if (c1 > c0)
      std::memcpy(to + (c0 - want_from), data + (c0 - pos), static_cast<size_t>(c1 - c0));
    for (int64_t q = 0; q < n && k < shards.size();) {
      const ShardInfo& s = *shards[k];
      const int64_t shard_end = (s.first_row + s.rows - lo) * row_bytes;
      const int64_t m = std::min(n - q, shard_end - (pos + q));
      crc = crc32c(crc, data + q, static_cast<size_t>(m));
      q += m;
      if (pos + q == shard_end) {
        if (crc != s.crc32c && damage.empty()) damage = shard_damage(info, s, crc, path);
        crc = 0;
        ++k;
      }
    }
    pos += n;
  };
  constexpr int64_t kPiece = 256 << 10;
  reader.read(data_offset + lo * row_bytes, (hi - lo) * row_bytes, [&](const char* data, int64_t n) {
    for (int64_t done = 0; done < n; done += kPiece) piece(data + done, std::min(kPiece, n - done));
  });
  return damage;
}

std::vector<int64_t> raw_data_offsets(hid_t file, const CheckpointInfo& info) {
  std::vector<int64_t> offsets;
  for (const auto& t : info.tensors) {
    int64_t offset = -1;
    if (t.bytes > 0) {
      H5Id dset(MPIACCEL_CHECK_HDF5(H5Dopen2(file, ("/" + t.name).c_str(), H5P_DEFAULT)));
      H5Id type(MPIACCEL_CHECK_HDF5(H5Dget_type(dset)));
      H5Id dcpl(MPIACCEL_CHECK_HDF5(H5Dget_create_plist(dset)));
      const haddr_t address = H5Dget_offset(dset);  // HADDR_UNDEF unless contiguous + allocated
      if (address != HADDR_UNDEF && H5Pget_external_count(dcpl) == 0 &&
          H5Dget_storage_size(dset) == static_cast<hsize_t>(t.bytes) &&
          H5Tget_size(type) == c10::elementSize(t.dtype))
        offset = static_cast<int64_t>(address);
    }
    offsets.push_back(offset);
  }
  H5Eclear2(H5E_DEFAULT);  // H5Dget_offset of a chunked dataset leaves an error
  return offsets;
}

at::Tensor empty_rows(const TensorInfo& info, int64_t rows) {
  if (info.shape.empty()) return at::empty({}, at::TensorOptions().dtype(info.dtype));
  std::vector<int64_t> shape = info.shape;
  shape[0] = rows;
  return at::empty(shape, at::TensorOptions().dtype(info.dtype));
}

}  // namespace mpiaccel::detail
