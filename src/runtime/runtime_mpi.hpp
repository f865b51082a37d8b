#pragma once
// Internal: the MPI handles behind mpiaccel::Runtime, for the comm module.

#include <mpi.h>

#include "mpiaccel/runtime.hpp"

namespace mpiaccel::detail {

struct RuntimeMpi {
  MPI_Comm world = MPI_COMM_NULL;  // a dup of MPI_COMM_WORLD, owned
  MPI_Comm node = MPI_COMM_NULL;   // ranks sharing this node (SPLIT_TYPE_SHARED), owned
};

struct RuntimeAccess {
  static MPI_Comm world(const Runtime& rt) { return rt.mpi_->world; }
  static MPI_Comm node(const Runtime& rt) { return rt.mpi_->node; }
};

}  // namespace mpiaccel::detail
