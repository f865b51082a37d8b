#include "checkpoint/tensor_io.hpp"

#include <ATen/ops/empty.h>

#include <cstdio>
#include <vector>

#include "checkpoint/crc32c.hpp"
#include "checkpoint/manifest.hpp"
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
    if (crc != s.crc32c) {
      char text[64];
      std::snprintf(text, sizeof text, "CRC32C 0x%08x, recorded 0x%08x", crc, s.crc32c);
      return "checkpoint " + path + " is damaged: tensor " + info.name + " rows [" +
             std::to_string(s.first_row) + ", " + std::to_string(s.first_row + s.rows) +
             ") saved by rank " + std::to_string(s.rank) + " fail their checksum (" + text + ")";
    }
  }
  return "";
}

at::Tensor empty_rows(const TensorInfo& info, int64_t rows) {
  if (info.shape.empty()) return at::empty({}, at::TensorOptions().dtype(info.dtype));
  std::vector<int64_t> shape = info.shape;
  shape[0] = rows;
  return at::empty(shape, at::TensorOptions().dtype(info.dtype));
}

}  // namespace mpiaccel::detail
