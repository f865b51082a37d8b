// The process's HDF5 lock (h5_handle.hpp): one mutex, out of line so that
// every library and program linking mpiaccel shares the same one.

#include <mutex>

namespace mpiaccel::detail {

std::recursive_mutex& hdf5_mutex() {
  static std::recursive_mutex mutex;
  return mutex;
}

}  // namespace mpiaccel::detail
