#pragma once
// The MPI communicator a Checkpointer opens its files over: its own duplicate
// of the handed Communicator's, so HDF5's collective MPI-IO can never
// interleave with that Communicator's operations (which its comm thread may
// be running on the original).

#include <mpi.h>

#include "mpiaccel/comm.hpp"

namespace mpiaccel::detail {

struct FileComm {
  /// MPI_Comm_dup of comm's MPI communicator. Collective over comm.
  explicit FileComm(const Communicator& comm);
  /// Frees the duplicate (unless MPI is finalized). Never throws.
  ~FileComm();
  FileComm(const FileComm&) = delete;
  FileComm& operator=(const FileComm&) = delete;

  MPI_Comm comm = MPI_COMM_NULL;
};

}  // namespace mpiaccel::detail
