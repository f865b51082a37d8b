// The data-parallel strategy of a config, resolved once (config.hpp,
// StrategyPlan): the kind, each strategy's own settings, and the checks that
// read several keys or sections.

#include "mpiaccel/config.hpp"

namespace mpiaccel {
namespace {

[[noreturn]] void refuse(const std::string& message) { throw ConfigError(message, __FILE__, __LINE__); }

// A [ddp] comm_hook under a sharding strategy would be ignored: refused instead.
void check_comm_hook_applies(const Config& config, StrategyKind kind) {
  if (config.ddp.comm_hook == CommHookChoice::None || kind == StrategyKind::Ddp || kind == StrategyKind::NoDist)
    return;
  refuse("[ddp] comm_hook = " + name_of(config.ddp.comm_hook) +
         " reduces DDP's gradient buckets, but [distributed] strategy = " + name_of(config.distributed.strategy) +
         " reduce-scatters shards: set strategy = ddp, or comm_hook = none");
}

// ZeRO++ works on stage 3's parameter gathers and gradient reduce-scatters;
// stages 0 to 2 gather no parameters in forward.
void refuse_zero_plus_plus_below_stage_3(const ZeroConfig& zero) {
  const char* asked = zero.quantized_weights               ? "quantized_weights (ZeRO++ qwZ)"
                      : zero.quantized_gradients           ? "quantized_gradients (ZeRO++ qgZ)"
                      : zero.secondary_partition_size != 1 ? "secondary_partition_size (ZeRO++ hpZ)"
                                                           : nullptr;
  if (!asked) return;
  refuse("[zero] " + std::string(asked) + " works on stage 3's sharded parameters; stage " +
         std::to_string(zero.stage) + " shards none: set stage = 3, or switch ZeRO++ off "
         "(quantized_weights = false, quantized_gradients = false, secondary_partition_size = 1)");
}

void check_zero_below_stage_3(const ZeroConfig& zero) {
  if (zero.stage == 0 && (zero.offload_optimizer != OffloadChoice::None || zero.offload_param != OffloadChoice::None))
    refuse("[zero] stage = 0 is plain DDP and offloads nothing: set offload_optimizer = none and "
           "offload_param = none, or use stage 1 or 2");
  refuse_zero_plus_plus_below_stage_3(zero);
}

// ZeRO-3 is FSDP full shard: the same machinery, with [zero]'s keys.
FsdpConfig zero3_as_fsdp(const Config& config) {
  FsdpConfig full_shard = config.fsdp;
  full_shard.sharding_strategy = ShardingStrategy::FullShard;
  full_shard.reshard_after_forward = true;
  full_shard.cpu_offload = config.zero.offload_param == OffloadChoice::Cpu;
  full_shard.quantized_weights = config.fsdp.quantized_weights || config.zero.quantized_weights;
  full_shard.quantized_gradients = config.fsdp.quantized_gradients || config.zero.quantized_gradients;
  if (config.zero.secondary_partition_size != 1)
    full_shard.secondary_partition_size = config.zero.secondary_partition_size;
  return full_shard;
}

// FSDP over a mesh with replicas is HSDP: shard groups of the mesh's
// dp_shard × cp ranks (a cp group shards with its dp_shard group).
void place_on_mesh(FsdpConfig& fsdp, const DataParallelShape& shape) {
  if (shape.shard_ranks == 0) return;
  if (shape.replicas == 1 && fsdp.sharding_strategy != ShardingStrategy::HybridShard) return;
  // SHARD_GRAD_OP keeps gathered parameters from forward to backward; as
  // HSDP it keeps doing so.
  if (fsdp.sharding_strategy == ShardingStrategy::ShardGradOp) fsdp.reshard_after_forward = false;
  fsdp.sharding_strategy = ShardingStrategy::HybridShard;
  fsdp.hybrid_group_size = shape.shard_ranks;
}

}  // namespace

std::string strategy_name(StrategyKind kind) {
  switch (kind) {
    case StrategyKind::NoDist: return "no";
    case StrategyKind::Ddp: return "ddp";
    case StrategyKind::Zero1: return "zero1";
    case StrategyKind::Zero2: return "zero2";
    case StrategyKind::Fsdp: return "fsdp";
    case StrategyKind::Zero3: return "zero3";
  }
  return "?";
}

StrategyPlan resolve_strategy(const Config& config, const DataParallelShape& shape) {
  StrategyPlan plan;
  plan.kind = strategy_kind(config);
  check_comm_hook_applies(config, plan.kind);
  plan.ddp = config.ddp;
  plan.zero = config.zero;
  plan.fsdp = plan.kind == StrategyKind::Zero3 ? zero3_as_fsdp(config) : config.fsdp;
  const bool zero_below_3 = config.distributed.strategy == StrategyChoice::Zero && plan.kind != StrategyKind::Zero3;
  if (zero_below_3) check_zero_below_stage_3(config.zero);
  if (plan.kind == StrategyKind::Fsdp) place_on_mesh(plan.fsdp, shape);
  return plan;
}

}  // namespace mpiaccel
