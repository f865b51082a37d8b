#pragma once
// The communicators of an FSDP strategy (internal).

#include <memory>

#include "fsdp/fsdp_engine.hpp"
#include "mpiaccel/config.hpp"

namespace mpiaccel::detail {

/// FULL_SHARD / SHARD_GRAD_OP: one shard group of every rank. HYBRID_SHARD:
/// shard groups of hybrid_group_size consecutive ranks (0 = the ranks of one
/// host, by host name), and replica groups of the ranks at the same place in
/// their shard group. Collective over `world`: every rank calls it, in the
/// same order.
FsdpComms make_fsdp_comms(const FsdpConfig& config, std::shared_ptr<Communicator> world);

}  // namespace mpiaccel::detail
