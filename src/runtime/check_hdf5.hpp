#pragma once
// MPIACCEL_CHECK_HDF5(call): throws mpiaccel::Error when an HDF5 call returns a
// negative value, with the innermost messages of HDF5's error stack (which
// otherwise HDF5 would print unasked). Only for modules that link HDF5.

#include <hdf5.h>

#include <string>

#include "mpiaccel/error.hpp"

namespace mpiaccel::detail {

/// The HDF5 error stack of this thread as one line (most specific last), and
/// clears it.
inline std::string hdf5_error_stack() {
  std::string text;
  auto walker = [](unsigned, const H5E_error2_t* err, void* out) -> herr_t {
    auto* s = static_cast<std::string*>(out);
    if (!s->empty()) *s += "; ";
    *s += err->func_name ? err->func_name : "?";
    *s += ": ";
    *s += err->desc ? err->desc : "";
    return 0;
  };
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, walker, &text);
  H5Eclear2(H5E_DEFAULT);
  return text.empty() ? std::string("no HDF5 error detail") : text;
}

}  // namespace mpiaccel::detail

#define MPIACCEL_CHECK_HDF5(call)                                                         \
  ([&]() {                                                                                \
    auto mpiaccel_h5_ = (call);                                                           \
    if (mpiaccel_h5_ < 0)                                                                 \
      ::mpiaccel::detail::throw_error(std::string(#call) + " failed: " +                  \
                                          ::mpiaccel::detail::hdf5_error_stack(),         \
                                      __FILE__, __LINE__);                                \
    return mpiaccel_h5_;                                                                  \
  }())
