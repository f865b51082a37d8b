#include "checkpoint/manifest/shard_record_type.hpp"

#include <algorithm>
#include <cstring>

#include "checkpoint/hdf5/h5_attributes.hpp"
#include "runtime/check_hdf5.hpp"

namespace mpiaccel::detail {
namespace {

// The name comes first, so the fields after it start at the name's length
// rounded up to 8 bytes.
size_t rank_offset(size_t name_length) { return (name_length + 7) / 8 * 8; }

}  // namespace

H5Id shard_memory_type(size_t name_length, size_t* record_size) {
  const size_t off_rank = rank_offset(name_length);
  const size_t off_first = off_rank + 8;
  const size_t off_rows = off_first + 8;
  const size_t off_crc = off_rows + 8;
  *record_size = off_crc + 8;
  H5Id type(MPIACCEL_CHECK_HDF5(H5Tcreate(H5T_COMPOUND, *record_size)));
  H5Id name_type = string_type(name_length);
  MPIACCEL_CHECK_HDF5(H5Tinsert(type, "name", 0, name_type));
  MPIACCEL_CHECK_HDF5(H5Tinsert(type, "rank", off_rank, H5T_NATIVE_INT32));
  MPIACCEL_CHECK_HDF5(H5Tinsert(type, "first_row", off_first, H5T_NATIVE_INT64));
  MPIACCEL_CHECK_HDF5(H5Tinsert(type, "rows", off_rows, H5T_NATIVE_INT64));
  MPIACCEL_CHECK_HDF5(H5Tinsert(type, "crc32c", off_crc, H5T_NATIVE_UINT32));
  return type;
}

H5Id shard_file_type(size_t name_length) {
  const size_t size = name_length + 4 + 8 + 8 + 4;
  H5Id type(MPIACCEL_CHECK_HDF5(H5Tcreate(H5T_COMPOUND, size)));
  H5Id name_type = string_type(name_length);
  MPIACCEL_CHECK_HDF5(H5Tinsert(type, "name", 0, name_type));
  MPIACCEL_CHECK_HDF5(H5Tinsert(type, "rank", name_length, H5T_STD_I32LE));
  MPIACCEL_CHECK_HDF5(H5Tinsert(type, "first_row", name_length + 4, H5T_STD_I64LE));
  MPIACCEL_CHECK_HDF5(H5Tinsert(type, "rows", name_length + 12, H5T_STD_I64LE));
  MPIACCEL_CHECK_HDF5(H5Tinsert(type, "crc32c", name_length + 20, H5T_STD_U32LE));
  return type;
}

void pack_shard_record(const ShardRecord& r, size_t name_length, unsigned char* row) {
  const size_t off_rank = rank_offset(name_length);
  std::memcpy(row, r.name.data(), std::min(r.name.size(), name_length));
  std::memcpy(row + off_rank, &r.rank, 4);
  std::memcpy(row + off_rank + 8, &r.first_row, 8);
  std::memcpy(row + off_rank + 16, &r.rows, 8);
  std::memcpy(row + off_rank + 24, &r.crc32c, 4);
}

ShardRecord unpack_shard_record(const unsigned char* row, size_t name_length) {
  const size_t off_rank = rank_offset(name_length);
  ShardRecord r;
  const char* name = reinterpret_cast<const char*>(row);
  r.name.assign(name, strnlen(name, name_length));
  std::memcpy(&r.rank, row + off_rank, 4);
  std::memcpy(&r.first_row, row + off_rank + 8, 8);
  std::memcpy(&r.rows, row + off_rank + 16, 8);
  std::memcpy(&r.crc32c, row + off_rank + 24, 4);
  return r;
}

}  // namespace mpiaccel::detail
