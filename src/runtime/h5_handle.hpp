#pragma once
// RAII ownership of HDF5 identifiers (checkpoints, HDF5 datasets), so an
// exception between an open and its close (a failed check, a failed rank
// agreement) never leaks a handle. Only for modules that link HDF5. Closing
// a file opened with the MPI-IO driver is collective: the save and load code
// closes such files explicitly, and only lets an H5Id close one while unwinding
// from an error every rank threw alike (see checkpoint_save.cpp).

#include <hdf5.h>

#include <mutex>
#include <utility>

namespace mpiaccel::detail {

class H5Id {
 public:
  H5Id() = default;
  explicit H5Id(hid_t id) : id_(id) {}
  H5Id(const H5Id&) = delete;
  H5Id& operator=(const H5Id&) = delete;
  H5Id(H5Id&& other) noexcept : id_(std::exchange(other.id_, H5I_INVALID_HID)) {}
  H5Id& operator=(H5Id&& other) noexcept {
    if (this != &other) {
      reset();
      id_ = std::exchange(other.id_, H5I_INVALID_HID);
    }
    return *this;
  }
  ~H5Id() { reset(); }

  hid_t get() const { return id_; }
  operator hid_t() const { return id_; }  // NOLINT: handles pass straight to H5* calls
  bool valid() const { return id_ >= 0; }
  hid_t release() { return std::exchange(id_, H5I_INVALID_HID); }

  /// Closes the handle (whatever kind of object it is); never throws. H5Idec_ref
  /// closes files, datasets, groups, types, spaces and property lists alike.
  void reset() {
    if (id_ >= 0) {
      H5E_BEGIN_TRY { H5Idec_ref(id_); }
      H5E_END_TRY;
    }
    id_ = H5I_INVALID_HID;
  }

 private:
  hid_t id_ = H5I_INVALID_HID;
};

/// HDF5's automatic error printing off for the process: our checks report the
/// error stack in the exception instead. Idempotent. This HDF5 build is not
/// thread-safe, so the setting is process-wide.
inline void silence_hdf5_errors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

/// The one lock every HDF5 call of the process is made under. Debian's
/// parallel HDF5 is built without its thread-safety option, yet three kinds of
/// threads reach it: the training thread, the background checkpoint writer
/// (async saves) and the loader's workers (an HDF5 dataset's rows). A save or
/// load holds it for its whole length, collectives included: a thread waiting
/// for it never holds anything another rank waits for (docs/design.md,
/// "Threads"). HDF5 datasets stored contiguously are read with pread instead
/// and never wait (src/data/hdf5_dataset.cpp).
/// Recursive: a locked save or load may call code that locks again.
std::recursive_mutex& hdf5_mutex();
using Hdf5Lock = std::lock_guard<std::recursive_mutex>;

}  // namespace mpiaccel::detail
