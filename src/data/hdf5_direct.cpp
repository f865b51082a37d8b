// Direct reads of contiguous HDF5 datasets (see hdf5_direct.hpp).

#include "data/hdf5_direct.hpp"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "mpiaccel/error.hpp"
#include "runtime/h5_handle.hpp"

namespace mpiaccel::detail {
namespace {

// The stored type as a LibTorch type, for the standard little-endian types
// only: anything else (big-endian, unsigned wider than a byte, half, custom
// floats) is left to HDF5's conversions.
std::optional<at::ScalarType> torch_type_of(hid_t type) {
  const std::pair<hid_t, at::ScalarType> known[] = {
      {H5T_IEEE_F32LE, at::kFloat}, {H5T_IEEE_F64LE, at::kDouble}, {H5T_STD_I8LE, at::kChar},
      {H5T_STD_U8LE, at::kByte},    {H5T_STD_I16LE, at::kShort},   {H5T_STD_I32LE, at::kInt},
      {H5T_STD_I64LE, at::kLong}};
  for (const auto& [h5, torch] : known)
    if (H5Tequal(type, h5) > 0) return torch;
  return std::nullopt;
}

}  // namespace

std::optional<DirectLayout> direct_layout(hid_t dataset, const std::vector<hsize_t>& dims) {
  // The bytes are used as they are: only where they are the host's order.
  if constexpr (__BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__) return std::nullopt;
  const H5Id plist(H5Dget_create_plist(dataset));
  if (!plist.valid() || H5Pget_layout(plist.get()) != H5D_CONTIGUOUS) return std::nullopt;
  if (H5Pget_nfilters(plist.get()) != 0 || H5Pget_external_count(plist.get()) != 0) return std::nullopt;
  haddr_t offset = HADDR_UNDEF;
  H5E_BEGIN_TRY { offset = H5Dget_offset(dataset); }
  H5E_END_TRY;
  if (offset == HADDR_UNDEF) return std::nullopt;  // never written: HDF5 supplies fill values
  const H5Id type(H5Dget_type(dataset));
  const std::optional<at::ScalarType> dtype = torch_type_of(type.get());
  if (!dtype) return std::nullopt;
  DirectLayout out;
  out.offset = static_cast<int64_t>(offset);
  out.dtype = *dtype;
  out.row_bytes = static_cast<int64_t>(H5Tget_size(type.get()));
  for (size_t d = 1; d < dims.size(); ++d) out.row_bytes *= static_cast<int64_t>(dims[d]);
  return out;
}

DirectFile::DirectFile(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  MPIACCEL_CHECK(fd_ >= 0, "cannot open HDF5 file " + path + " for reading: " + std::strerror(errno));
}

DirectFile::~DirectFile() {
  if (fd_ >= 0) ::close(fd_);
}

at::Tensor DirectFile::read_rows(const DirectLayout& layout, const std::vector<hsize_t>& rows,
                                 const std::vector<int64_t>& sample_shape,
                                 const std::string& what) const {
  std::vector<int64_t> shape{static_cast<int64_t>(rows.size())};
  shape.insert(shape.end(), sample_shape.begin(), sample_shape.end());
  at::Tensor out = at::empty(shape, at::TensorOptions().dtype(layout.dtype));
  auto* bytes = static_cast<char*>(out.data_ptr());
  for (size_t i = 0; i < rows.size();) {
    size_t j = i + 1;
    while (j < rows.size() && rows[j] == rows[j - 1] + 1) ++j;
    int64_t want = static_cast<int64_t>(j - i) * layout.row_bytes;
    int64_t at = layout.offset + static_cast<int64_t>(rows[i]) * layout.row_bytes;
    char* into = bytes + static_cast<int64_t>(i) * layout.row_bytes;
    while (want > 0) {
      const ssize_t got = ::pread(fd_, into, static_cast<size_t>(want), at);
      if (got < 0 && errno == EINTR) continue;
      MPIACCEL_CHECK(got > 0, "cannot read HDF5 " + path_ + ":" + what + " rows " +
                                  std::to_string(rows[i]) + ".." + std::to_string(rows[j - 1]) + ": " +
                                  (got == 0 ? std::string("the file ends early (truncated?)")
                                            : std::string(std::strerror(errno))));
      want -= got;
      at += got;
      into += got;
    }
    i = j;
  }
  return out;
}

}  // namespace mpiaccel::detail
