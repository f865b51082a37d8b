#pragma once
// Internal: the MPI communicator behind a Communicator, for code that must
// call MPI (or MPI-IO through HDF5) over the same ranks: an MpiCommunicator's
// own, an NcclCommunicator's host-side one.

#include <mpi.h>

#include "mpiaccel/comm.hpp"

namespace mpiaccel::detail {

/// The MPI communicator of `comm` (not a copy: duplicate it before issuing
/// operations of your own, so they cannot interleave with comm's). Throws
/// mpiaccel::Error for a Communicator with no MPI communicator.
MPI_Comm mpi_comm_of(const Communicator& comm);

/// The host-side MPI communicator of an NCCL communicator, or MPI_COMM_NULL
/// if `comm` is none (nccl_communicator.cpp / nccl_unavailable.cpp).
MPI_Comm nccl_host_mpi_comm(const Communicator& comm);

}  // namespace mpiaccel::detail
