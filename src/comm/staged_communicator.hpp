#pragma once
// Internal: the MPI communicator for device tensors, through host staging.
//
// For several ranks on one GPU (NCCL refuses two ranks of a communicator on
// one device) and for backend = mpi on GPUs. Each device tensor of an op is
// copied into pinned host memory when the op is issued (after the work the
// caller queued on its stream: the copy synchronises with it), the MPI op
// runs on the host copies on the MPI communicator's thread, and wait() copies
// the results back asynchronously on the caller's current stream (the pinned
// allocator keeps the host memory until that copy is done). Host tensors pass
// straight through. Host traffic (bytes, splits) is the MPI communicator's.

#include <memory>

#include "comm/mpi_handle.hpp"
#include "mpiaccel/comm.hpp"

namespace mpiaccel::detail {

/// `mpi`: an MPI communicator (make_mpi_world or a split of one).
std::shared_ptr<Communicator> make_staged(std::shared_ptr<Communicator> mpi);

}  // namespace mpiaccel::detail
