#include "checkpoint/save/shard_table_writer.hpp"

#include "checkpoint/manifest/shard_record_type.hpp"
#include "mpiaccel/error.hpp"
#include "runtime/check_hdf5.hpp"

namespace mpiaccel::detail {

void write_shard_index(hid_t meta_group, const std::vector<int64_t>& counts, bool writer,
                       hid_t dxpl) {
  const hsize_t dims[2] = {counts.size(), 2};
  H5Id space(MPIACCEL_CHECK_HDF5(H5Screate_simple(2, dims, nullptr)));
  H5Id dset(MPIACCEL_CHECK_HDF5(H5Dcreate2(meta_group, "shard_index", H5T_STD_I64LE, space,
                                           H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));  // collective
  std::vector<int64_t> pairs(2 * counts.size() + 1);
  int64_t next = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    pairs[2 * i] = next;
    pairs[2 * i + 1] = counts[i];
    next += counts[i];
  }
  H5Id file_space(MPIACCEL_CHECK_HDF5(H5Dget_space(dset)));
  H5Id mem_space(MPIACCEL_CHECK_HDF5(H5Screate_simple(2, dims, nullptr)));
  if (!writer) {
    MPIACCEL_CHECK_HDF5(H5Sselect_none(file_space));
    MPIACCEL_CHECK_HDF5(H5Sselect_none(mem_space));
  }
  if (!counts.empty())
    MPIACCEL_CHECK_HDF5(H5Dwrite(dset, H5T_NATIVE_INT64, mem_space, file_space, dxpl, pairs.data()));  // collective
}

void write_shard_table(hid_t meta_group, const std::vector<ShardRecord>& records,
                       const std::vector<int64_t>& positions, size_t total, size_t name_length,
                       hid_t dxpl) {
  MPIACCEL_CHECK(positions.size() == records.size(), "checkpoint: a shard record without its position");
  H5Id ftype = shard_file_type(name_length);
  size_t record_size = 0;
  H5Id mtype = shard_memory_type(name_length, &record_size);
  const hsize_t dims[1] = {total};
  H5Id space(MPIACCEL_CHECK_HDF5(H5Screate_simple(1, dims, nullptr)));
  H5Id dset(MPIACCEL_CHECK_HDF5(H5Dcreate2(meta_group, "shards", ftype, space, H5P_DEFAULT,
                                           H5P_DEFAULT, H5P_DEFAULT)));  // collective
  std::vector<unsigned char> buffer(record_size * records.size() + 1, 0);
  std::vector<hsize_t> coords(records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    pack_shard_record(records[i], name_length, buffer.data() + i * record_size);
    MPIACCEL_CHECK(positions[i] >= 0 && static_cast<size_t>(positions[i]) < total,
                   "checkpoint: shard record position outside the table");
    coords[i] = static_cast<hsize_t>(positions[i]);
  }
  H5Id file_space(MPIACCEL_CHECK_HDF5(H5Dget_space(dset)));
  const hsize_t count[1] = {records.size()};
  H5Id mem_space(MPIACCEL_CHECK_HDF5(H5Screate_simple(1, count, nullptr)));
  if (records.empty()) {
    MPIACCEL_CHECK_HDF5(H5Sselect_none(file_space));
    MPIACCEL_CHECK_HDF5(H5Sselect_none(mem_space));
  } else {
    MPIACCEL_CHECK_HDF5(H5Sselect_elements(file_space, H5S_SELECT_SET, coords.size(), coords.data()));
  }
  if (total > 0)
    MPIACCEL_CHECK_HDF5(H5Dwrite(dset, mtype, mem_space, file_space, dxpl, buffer.data()));  // collective
}

}  // namespace mpiaccel::detail
