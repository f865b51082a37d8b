#pragma once
// Rows of a contiguous HDF5 dataset read with pread, without the HDF5 library.
//
// Why: Debian's HDF5 is not thread-safe, so every HDF5 call of the process
// waits for one lock (runtime/h5_handle.hpp), and a background checkpoint
// save holds it for seconds. An HDF5 dataset stored contiguously, uncompressed,
// in a little-endian standard type (h5py's default for arrays) is a plain
// array at one offset of the file: its rows are read directly, from any thread,
// at any time. Other layouts (chunked, compressed, external) go through
// H5Dread under the lock.

#include <ATen/core/Tensor.h>
#include <hdf5.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mpiaccel::detail {

/// Where and how a dataset's rows lie in its file, when they can be read directly.
struct DirectLayout {
  int64_t offset = 0;     ///< file offset of row 0
  int64_t row_bytes = 0;  ///< bytes of one row (all dims after the first)
  at::ScalarType dtype = at::kFloat;  ///< the stored element type
};

/// The layout of `dataset` if it is contiguous, allocated, unfiltered, not
/// external and of a little-endian standard numeric type that LibTorch has
/// (float32/64, int8/16/32/64, uint8); nullopt otherwise. Call under the HDF5 lock.
std::optional<DirectLayout> direct_layout(hid_t dataset, const std::vector<hsize_t>& dims);

/// An open file read by pread (thread-safe: no shared file position).
class DirectFile {
 public:
  explicit DirectFile(const std::string& path);
  ~DirectFile();
  DirectFile(const DirectFile&) = delete;
  DirectFile& operator=(const DirectFile&) = delete;

  /// Rows `rows` (sorted, distinct) of the dataset at `layout`, one after
  /// another, as a tensor [rows.size(), sample_shape...] of the stored type.
  /// Runs of consecutive rows are one pread each.
  at::Tensor read_rows(const DirectLayout& layout, const std::vector<hsize_t>& rows,
                       const std::vector<int64_t>& sample_shape, const std::string& what) const;

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace mpiaccel::detail
