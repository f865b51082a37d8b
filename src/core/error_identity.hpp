#pragma once
// Who raises an mpiaccel::Error. Error lives in config (the lowest module) so
// every module can throw it, but only runtime knows the rank and host: it calls
// set_error_identity() once after MPI_Init. Before that errors say no rank.

#include <string>

namespace mpiaccel::detail {

/// Sets the rank and host every later Error carries (rank < 0: no rank).
void set_error_identity(int rank, std::string host);

}  // namespace mpiaccel::detail
