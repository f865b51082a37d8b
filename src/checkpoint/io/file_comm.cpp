#include "checkpoint/io/file_comm.hpp"

#include "comm/mpi_handle.hpp"
#include "runtime/check_mpi.hpp"

namespace mpiaccel::detail {

FileComm::FileComm(const Communicator& comm) {
  MPIACCEL_CHECK_MPI(MPI_Comm_dup(mpi_comm_of(comm), &this->comm));  // collective
}

FileComm::~FileComm() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
}

}  // namespace mpiaccel::detail
