#pragma once
// The strategy the Accelerator runs (make_strategy.cpp).

#include <memory>

#include "mpiaccel/comm.hpp"
#include "mpiaccel/config.hpp"
#include "mpiaccel/precision.hpp"
#include "mpiaccel/strategies.hpp"
#include "mpiaccel/strategy.hpp"

namespace mpiaccel::detail {

/// The strategy `plan` resolves, over `comm`, computing with `precision`.
std::unique_ptr<Strategy> make_strategy(const StrategyPlan& plan, const PrecisionPolicy& precision,
                                        std::shared_ptr<Communicator> comm);

/// make_strategy(plan, precision, comm), except that a sharding strategy (FSDP, ZeRO
/// 1-3) over one rank, with nothing for its sharded path to define (an
/// all-fp32 precision policy, no offload, no ZeRO++), runs as one process
/// does: no gathers, no reduce-scatters, parameters and optimizer state whole
/// (torch's FSDP runs NO_SHARD at world size 1). It keeps the strategy's
/// name, and its checkpoint holds the same tensors (docs/fsdp.md, "One
/// rank"). `*one_process` says which was made. Collective over comm.
std::unique_ptr<Strategy> make_run_strategy(const StrategyPlan& plan, const PrecisionPolicy& precision,
                                            std::shared_ptr<Communicator> comm, bool* one_process);
/// make_run_strategy of resolve_strategy(config) (a flat data-parallel group).
std::unique_ptr<Strategy> make_run_strategy(const Config& config, std::shared_ptr<Communicator> comm,
                                            bool* one_process);

}  // namespace mpiaccel::detail
