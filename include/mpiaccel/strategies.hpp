#pragma once
// The data-parallel strategies by name (src/strategies): a config's
// [distributed] strategy, resolved once (resolve_strategy, config.hpp), made
// into DDP (ZeRO stage 0 too), ZeRO stages 1-2 or FSDP (ZeRO stage 3 is FSDP
// full shard). The Accelerator makes its strategy here; a program of its own
// may too.

#include <memory>

#include "mpiaccel/config.hpp"
#include "mpiaccel/strategy.hpp"

namespace mpiaccel {

class Communicator;

/// The strategy named by config.distributed.strategy over `comm` (a flat
/// data-parallel group), computing with [distributed]'s precision.
std::unique_ptr<Strategy> make_strategy(const Config& config, std::shared_ptr<Communicator> comm);

}  // namespace mpiaccel
