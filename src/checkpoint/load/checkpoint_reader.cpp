// The serial reader: the sec2 driver, no MPI. A parallel HDF5 build opens
// files this way without MPI_Init, which is what `mpiaccel ckpt` relies on.

#include <hdf5.h>

#include <algorithm>

#include "checkpoint/save/commit.hpp"
#include "core/crc32c.hpp"
#include "runtime/h5_handle.hpp"
#include "checkpoint/manifest/manifest_reader.hpp"
#include "checkpoint/load/tensor_io.hpp"
#include "mpiaccel/checkpoint.hpp"
#include "runtime/check_hdf5.hpp"

namespace mpiaccel {

struct CheckpointReader::Impl {
  detail::H5Id file;
  CheckpointInfo info;

  const TensorInfo& tensor(const std::string& name) const {
    const TensorInfo* t = info.find(name);
    MPIACCEL_CHECK(t != nullptr, "checkpoint " + info.path + " has no tensor " + name);
    return *t;
  }
  detail::H5Id open(const TensorInfo& t) const {
    return detail::H5Id(MPIACCEL_CHECK_HDF5(H5Dopen2(file, ("/" + t.name).c_str(), H5P_DEFAULT)));
  }
};

// Every HDF5 call under the process's lock: a user's program may read a
// checkpoint while a background save runs (runtime/h5_handle.hpp).
CheckpointReader::CheckpointReader(const std::string& path_or_dir) : impl_(new Impl) {
  const detail::Hdf5Lock hdf5(detail::hdf5_mutex());
  detail::silence_hdf5_errors();
  const std::string path = detail::resolve_checkpoint(path_or_dir);
  impl_->file = detail::open_checkpoint_file_serial(path);
  impl_->info = detail::read_manifest(impl_->file, path);
}

CheckpointReader::~CheckpointReader() {
  const detail::Hdf5Lock hdf5(detail::hdf5_mutex());
  impl_.reset();
}

const CheckpointInfo& CheckpointReader::info() const { return impl_->info; }

at::Tensor CheckpointReader::read_rows(const std::string& name, int64_t first_row,
                                       int64_t rows) const {
  const detail::Hdf5Lock hdf5(detail::hdf5_mutex());
  const TensorInfo& t = impl_->tensor(name);
  int64_t lo = 0, hi = 0;
  detail::covering_shards(t, first_row, rows, &lo, &hi);  // checks the range
  at::Tensor out = detail::empty_rows(t, t.shape.empty() ? 1 : rows);
  detail::H5Id dset = impl_->open(t);
  detail::read_rows(dset, t, first_row, rows, out.data_ptr(), H5P_DEFAULT);
  return out;
}

at::Tensor CheckpointReader::read(const std::string& name) const {
  const TensorInfo& t = impl_->tensor(name);
  const int64_t rows = detail::row_count_of(t.shape);
  at::Tensor out = read_rows(name, 0, rows);
  const std::string damage = detail::check_shard_crcs(t, out.data_ptr(), 0, rows, impl_->info.path);
  MPIACCEL_CHECK(damage.empty(), damage);
  return out;
}

std::vector<std::string> CheckpointReader::verify() const {
  // Shard by shard, in pieces of at most kPiece bytes, so memory stays bounded
  // whatever the shard size.
  constexpr int64_t kPiece = 64 << 20;
  const detail::Hdf5Lock hdf5(detail::hdf5_mutex());
  std::vector<std::string> problems;
  for (const auto& t : impl_->info.tensors) {
    if (t.bytes == 0) continue;
    const int64_t row_bytes = detail::row_bytes_of(t.shape, t.dtype);
    const int64_t rows_per_piece = std::max<int64_t>(1, kPiece / std::max<int64_t>(row_bytes, 1));
    try {
      detail::H5Id dset = impl_->open(t);
      std::vector<unsigned char> buffer;
      for (const auto& s : t.shards) {
        uint32_t crc = 0;
        for (int64_t row = s.first_row; row < s.first_row + s.rows; row += rows_per_piece) {
          const int64_t n = std::min(rows_per_piece, s.first_row + s.rows - row);
          buffer.resize(static_cast<size_t>(n * row_bytes));
          detail::read_rows(dset, t, row, n, buffer.data(), H5P_DEFAULT);
          crc = detail::crc32c(crc, buffer.data(), buffer.size());
        }
        if (crc != s.crc32c) {
          char text[96];
          std::snprintf(text, sizeof text, "CRC32C 0x%08x, recorded 0x%08x", crc, s.crc32c);
          problems.push_back(t.name + ": rows [" + std::to_string(s.first_row) + ", " +
                             std::to_string(s.first_row + s.rows) + ") saved by rank " +
                             std::to_string(s.rank) + " are damaged (" + text + ")");
        }
      }
    } catch (const Error& e) {
      problems.push_back(t.name + ": unreadable: " + e.message());
    }
  }
  return problems;
}

}  // namespace mpiaccel
