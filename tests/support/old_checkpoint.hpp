#pragma once
// Checkpoint files as older mpiaccel versions wrote them, made from a current
// one with the HDF5 C API: how the tests get files of format version 1
// (docs/checkpoint.md, "Format versions") without keeping binary fixtures.

#include <hdf5.h>

#include <cstdint>

namespace mpiaccel::test {

/// Sets the root attribute format_version of a checkpoint opened read-write.
inline bool set_format_version(hid_t file, int64_t version) {
  const hid_t attr = H5Aopen(file, "format_version", H5P_DEFAULT);
  if (attr < 0) return false;
  const bool ok = H5Awrite(attr, H5T_NATIVE_INT64, &version) >= 0;
  H5Aclose(attr);
  return ok;
}

/// Makes a checkpoint opened read-write what format version 1 was: the same
/// file without /meta/shard_index, format_version 1.
inline bool make_format_version_1(hid_t file) {
  return set_format_version(file, 1) && H5Ldelete(file, "/meta/shard_index", H5P_DEFAULT) >= 0;
}

}  // namespace mpiaccel::test
