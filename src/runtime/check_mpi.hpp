#pragma once
// MPIACCEL_CHECK_MPI(call): throws mpiaccel::Error with the MPI library's own
// message when an MPI call does not return MPI_SUCCESS.

#include <mpi.h>

#include <string>

#include "mpiaccel/error.hpp"

namespace mpiaccel::detail {
std::string mpi_error_string(int code);
}  // namespace mpiaccel::detail

#define MPIACCEL_CHECK_MPI(call)                                                   \
  do {                                                                             \
    int mpiaccel_rc_ = (call);                                                     \
    if (mpiaccel_rc_ != MPI_SUCCESS)                                               \
      ::mpiaccel::detail::throw_error(std::string(#call) + " failed: " +           \
                                          ::mpiaccel::detail::mpi_error_string(mpiaccel_rc_), \
                                      __FILE__, __LINE__);                         \
  } while (0)
