#include "checkpoint/h5_handle.hpp"

namespace mpiaccel::detail {

void silence_hdf5_errors() {
  // This HDF5 build is not thread-safe, so the setting is process-wide; every
  // HDF5 call of mpiaccel is on the caller's thread anyway.
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

}  // namespace mpiaccel::detail
