#pragma once
// The replicated strategies: DDP (every rank holds the whole model, gradients
// are averaged by a bucketed all-reduce overlapped with backward; docs/ddp.md)
// and NoDist (no communication at all).

#include <memory>

#include "mpiaccel/config.hpp"
#include "mpiaccel/precision.hpp"
#include "mpiaccel/strategy.hpp"

namespace mpiaccel {

class Communicator;

/// DDP over `comm`, configured by [ddp]. prepare() checks the model is the
/// same on every rank, broadcasts rank 0's parameters and buffers, and installs
/// the gradient hooks. Buckets are all-reduced in `precision.reduce_dtype`
/// (docs/precision.md). Every Strategy call is collective over comm.
std::unique_ptr<Strategy> make_ddp_strategy(const DdpConfig& config,
                                            std::shared_ptr<Communicator> comm,
                                            const PrecisionPolicy& precision = {});

/// No distribution: the model trains as in a single process; nothing is
/// communicated. `comm` (optional) only tells this rank's place for saving:
/// rank 0 writes every row of the state dict, other ranks none, so a collective
/// checkpoint of independent ranks holds rank 0's model. `name` is what
/// name() says: "no", or the sharding strategy a one-rank group runs as one
/// process (Accelerator, docs/fsdp.md "One rank").
std::unique_ptr<Strategy> make_no_dist_strategy(std::shared_ptr<Communicator> comm = nullptr,
                                                std::string name = "no");

}  // namespace mpiaccel
