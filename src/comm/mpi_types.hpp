#pragma once
// Internal: how torch dtypes and mpiaccel::ReduceOp map onto MPI.
//
// float16 and bfloat16 travel as 2-byte elements and are reduced by
// user-defined MPI_Ops (elementwise in float, rounded back to 16 bits), so a
// bf16 gradient all-reduce moves half the bytes of an fp32 one. Avg is Sum on
// the wire followed by an in-place division.

#include <mpi.h>

#include <ATen/core/Tensor.h>

#include "mpiaccel/comm.hpp"

namespace mpiaccel::detail {

/// Creates the 2-byte datatype and the 16-bit reduction ops once per process
/// (thread-safe). MPI must be initialised.
void init_mpi_types();

/// The MPI datatype of one element of `dtype` (a supported dtype).
MPI_Datatype mpi_datatype(at::ScalarType dtype);

/// The MPI_Op that reduces `dtype` elements for `op` (Avg maps to the sum).
MPI_Op mpi_reduce_op(ReduceOp op, at::ScalarType dtype);

}  // namespace mpiaccel::detail
