#pragma once
// Fully sharded data parallelism (FSDP2-style; docs/fsdp.md): every
// parameter is sharded along dim 0 over the ranks of a shard group; a unit's
// shards are all-gathered together just before the unit runs and freed after;
// gradients are reduce-scattered so each rank keeps only its rows; the
// optimizer steps on the shards. ZeRO stage 3 is this strategy with
// FULL_SHARD.
//
// A model lets FSDP run its units by deriving from mpiaccel::HasUnits and
// running each unit through units().run (include/mpiaccel/unit.hpp); the wrap
// policy ([fsdp] auto_wrap_policy) picks which of its modules are units.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "mpiaccel/config.hpp"
#include "mpiaccel/precision.hpp"
#include "mpiaccel/strategy.hpp"

namespace mpiaccel {

class Communicator;

/// FSDP over `comm`, configured by [fsdp]; `name` is what Strategy::name()
/// answers ("fsdp"; ZeRO-3 passes "zero3"). Throws mpiaccel::Error for a
/// config value it does not support. prepare() checks the model is the same
/// on every rank, broadcasts rank 0's values, shards the parameters, installs
/// the unit interceptor and the gradient hooks, and re-points the optimizer's
/// parameter groups at the shards. Parameters are all-gathered in
/// `precision.param_dtype` and gradients reduce-scattered in
/// `precision.reduce_dtype` (docs/precision.md); shards stay fp32. Every
/// Strategy call is collective over comm.
std::unique_ptr<Strategy> make_fsdp_strategy(const FsdpConfig& config,
                                             std::shared_ptr<Communicator> comm,
                                             std::string name = "fsdp",
                                             const PrecisionPolicy& precision = {});

/// What an FSDP strategy made of the model (after prepare), for tests,
/// estimate-memory and logs.
struct FsdpUnitInfo {
  std::string name;         ///< module path ("blocks.0"); "" for the root
  std::string module_class; ///< Module::name() ("DecoderLayer")
  int64_t numel = 0;        ///< parameter elements (full)
  int64_t full_bytes = 0;   ///< bytes when gathered
  bool managed = false;     ///< the model has run it through units().run
  bool gathered = false;    ///< its full parameters hold data now
};
struct FsdpInfo {
  std::vector<FsdpUnitInfo> units;  ///< units[0] is the root
  int shard_group_size = 1;         ///< ranks a parameter is sharded over
  int replica_groups = 1;           ///< shard groups (> 1 only with HYBRID_SHARD)
  /// Full bytes of the largest unit that is gathered only around its
  /// forward/backward: the transient on top of MemoryAccount.
  int64_t largest_unit_bytes = 0;
  /// Full bytes held gathered between steps (the root; units never run
  /// through units().run): part of MemoryAccount::param_bytes.
  int64_t resident_full_bytes = 0;
  /// Synchronized backwards finished.
  int64_t iterations = 0;
};
/// Throws mpiaccel::Error if `strategy` is not an FSDP strategy or is not prepared.
FsdpInfo fsdp_info(const Strategy& strategy);

/// The model's full state (every parameter and buffer at its full shape,
/// named as in named_parameters()/named_buffers()) gathered to rank 0, one
/// unit at a time, for export ([fsdp] state_dict_type = FULL_STATE_DICT).
/// Other ranks get an empty list. Collective over the strategy's communicator.
std::vector<std::pair<std::string, at::Tensor>> full_state_dict(Strategy& strategy);

}  // namespace mpiaccel
