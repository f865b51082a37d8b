#pragma once
// Property lists of the parallel (MPI-IO) checkpoint file.

#include <hdf5.h>
#include <mpi.h>

#include "runtime/h5_handle.hpp"

namespace mpiaccel::detail {

/// Objects of at least kAlignThreshold bytes start on a kAlignment boundary:
/// a tensor then begins on a file-system block (and a Lustre stripe of 1 MiB),
/// so no two ranks' writes share a block of a big tensor.
inline constexpr hsize_t kAlignThreshold = 1 << 20;
inline constexpr hsize_t kAlignment = 1 << 20;

/// MPI-IO driver over `comm`, collective metadata writes, alignment.
H5Id make_parallel_fapl(MPI_Comm comm);
/// A transfer list: collective (every rank joins each H5Dwrite/H5Dread) or independent.
H5Id make_transfer_list(bool collective);

}  // namespace mpiaccel::detail
