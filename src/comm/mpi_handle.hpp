#pragma once
// Internal: the MPI communicator behind a Communicator, for code that must
// call MPI (or MPI-IO through HDF5) over the same ranks: an MpiCommunicator's
// own, or the host-side one of a communicator that moves device tensors
// (NCCL, or MPI with device↔host staging).

#include <mpi.h>

#include "mpiaccel/comm.hpp"

namespace mpiaccel::detail {

/// A communicator whose host-side traffic (byte blobs, scalars, the
/// bootstrap of splits) runs over an MPI communicator of the same ranks.
class HostBacked {
 public:
  virtual ~HostBacked() = default;
  /// The MPI communicator under it.
  virtual const Communicator& host() const = 0;
};

/// The MPI communicator of `comm` (not a copy: duplicate it before issuing
/// operations of your own, so they cannot interleave with comm's). Throws
/// mpiaccel::Error for a Communicator with no MPI communicator.
MPI_Comm mpi_comm_of(const Communicator& comm);

}  // namespace mpiaccel::detail
