#pragma once
// Internal: which ranks of the job are still alive, asked without MPI, the
// thing that broke. Every process keeps a TCP port open for its lifetime (a
// thread accepts and closes whatever connects), and the table of every rank's
// host and port is gathered when MPI starts. A failing rank connects to every
// peer's port at once and waits about 2 s: a port that refuses or does not
// answer belongs to a process that is gone (killed, or its host lost). fatal()
// appends what it finds, so a job that dies of a lost node says which ranks
// and which host it lost, not only which collective was stuck.

#include <mpi.h>

#include <string>

namespace mpiaccel::detail {

/// Opens this process's port and gathers every rank's host and port.
/// Collective over `world`.
void start_peer_liveness(MPI_Comm world, int rank, const std::string& host);

/// "ranks 2-3 on node2 no longer answer" (grouped by host, lowest first), or
/// "" when every peer answers or the table was never gathered. Blocks for
/// at most about 2 s. Never throws.
std::string describe_lost_peers() noexcept;

}  // namespace mpiaccel::detail
