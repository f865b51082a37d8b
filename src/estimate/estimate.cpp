// The ZeRO paper's per-rank model-state accounting, per strategy and
// precision (the table is in include/mpiaccel/estimate.hpp).

#include <string>
#include <utility>
#include <vector>

#include "mpiaccel/error.hpp"
#include "mpiaccel/estimate.hpp"
#include "estimate/pipeline_stages.hpp"

namespace mpiaccel {
namespace {

constexpr int64_t kFp32 = 4;  // bytes of a float32

}  // namespace

int64_t shard_elements(const ModelFootprint& model, int world) {
  MPIACCEL_CHECK(world >= 1, "estimate-memory: the world size must be at least 1");
  if (model.tensors.empty()) return (model.params + world - 1) / world;
  int64_t elements = 0;
  for (const ParamRows& t : model.tensors) elements += (t.rows + world - 1) / world * t.row_numel;
  return elements;
}

int64_t optimizer_slots(const OptimizerConfig& optimizer) {
  if (optimizer.name == OptimizerChoice::Sgd) return optimizer.momentum != 0.0 ? 1 : 0;
  return 2;  // AdamW: exp_avg, exp_avg_sq
}

namespace {

// Offloaded, on the host: the fp32 shard (master), its fp32 gradient and the slots.
void offload_shard(MemoryEstimate& row, int64_t elements, const EstimateSettings& settings) {
  row.host_param_bytes += kFp32 * elements;
  row.host_grad_bytes += kFp32 * elements;
  row.host_optimizer_bytes += settings.optimizer_slots * kFp32 * elements;
}

// Parameter bytes p and optimizer bytes k per element at the row's precision
// (the fp32 master rides with the optimizer in mixed precision).
std::pair<int64_t, int64_t> bytes_per_element(MixedPrecision precision, const EstimateSettings& settings) {
  if (precision == MixedPrecision::No) return {kFp32, settings.optimizer_slots * kFp32};
  return {2, kFp32 + settings.optimizer_slots * kFp32};
}

void count_ddp(MemoryEstimate& row, const ModelFootprint& model, const EstimateSettings& settings, int64_t p,
               int64_t k) {
  MPIACCEL_CHECK(!row.offload, "estimate-memory: DDP offloads nothing");
  MPIACCEL_CHECK(settings.node_shared_ranks >= 1, "estimate-memory: node_shared_ranks must be >= 1");
  const int64_t own = settings.node_shared_ranks > 1 ? shard_elements(model, settings.node_shared_ranks) : model.params;
  row.param_bytes = p * own;
  row.grad_bytes = p * model.params * (settings.gradient_as_bucket_view ? 1 : 2);
  row.optimizer_bytes = k * own;
}

void count_zero(MemoryEstimate& row, const ModelFootprint& model, const EstimateSettings& settings, int64_t p,
                int64_t k) {
  const int64_t shard = shard_elements(model, settings.world_size);
  row.param_bytes = p * model.params;
  row.grad_bytes = row.kind == StrategyKind::Zero1 ? p * model.params : p * shard;
  if (row.offload) offload_shard(row, shard, settings);
  else row.optimizer_bytes = k * shard;
}

void count_fsdp(MemoryEstimate& row, const ModelFootprint& model, const EstimateSettings& settings, int64_t p,
                int64_t k) {
  const int64_t shard = shard_elements(model, settings.world_size);
  // The root stays gathered beside its shard. Around a unit's forward and
  // backward the largest unit and the prefetched next one are gathered;
  // without resharding after forward every unit is, from the end of
  // forward into backward.
  if (model.units > 0) {
    row.gathered_bytes = settings.reshard_after_forward ? (model.units > 1 ? 2 : 1) * p * model.largest_unit_params
                                                        : p * (model.params - model.root_params);
  }
  row.param_bytes = p * model.root_params;
  if (row.offload) {
    offload_shard(row, shard, settings);
  } else {
    row.param_bytes += p * shard;
    row.grad_bytes = p * shard;
    row.optimizer_bytes = k * shard;
  }
}

}  // namespace

MemoryEstimate estimate_memory(const ModelFootprint& model, const ModelSpec& spec, StrategyKind strategy,
                               bool offload, MixedPrecision precision, const EstimateSettings& settings) {
  MPIACCEL_CHECK(settings.world_size >= 1, "estimate-memory: the world size must be at least 1");
  MemoryEstimate row;
  row.kind = strategy == StrategyKind::Zero3 ? StrategyKind::Fsdp : strategy;
  row.strategy = strategy_name(row.kind);
  row.offload = offload;
  row.mixed_precision = precision;
  row.precision = precision == MixedPrecision::No ? "fp32" : name_of(precision);
  row.world_size = settings.world_size * settings.tp_size;
  row.tp_size = settings.tp_size;
  const auto [p, k] = bytes_per_element(precision, settings);
  switch (row.kind) {
    case StrategyKind::NoDist:
    case StrategyKind::Ddp: count_ddp(row, model, settings, p, k); break;
    case StrategyKind::Zero1:
    case StrategyKind::Zero2: count_zero(row, model, settings, p, k); break;
    case StrategyKind::Fsdp:
    case StrategyKind::Zero3: count_fsdp(row, model, settings, p, k); break;
  }
  ModelSpec shard_spec = spec;  // the positions this rank holds
  shard_spec.block_size = spec.block_size / std::max(1, settings.cp_size);
  row.activation_bytes = activation_bytes(model.kind, shard_spec, settings.batch_size, p,
                                          settings.activation_checkpointing, settings.tp_size,
                                          settings.sequence_parallel);
  return row;
}

std::vector<MemoryEstimate> estimate_all(const Config& config, int world_size) {
  const ModelSpec spec = ModelSpec::from(config.model, config.train.seq_len);
  const int64_t tp = config.parallelism.tp_size;
  const int64_t pp = config.parallelism.pp_size;
  const int64_t cp = config.parallelism.cp_size;
  MPIACCEL_CHECK(world_size % (tp * pp * cp) == 0,
                 "estimate-memory: [parallelism] tp_size " + std::to_string(tp) + " × pp_size " + std::to_string(pp) +
                     " × cp_size " + std::to_string(cp) + " does not divide the " + std::to_string(world_size) +
                     " ranks");
  MPIACCEL_CHECK(cp == 1 || pp == 1, "estimate-memory: cp_size with pp_size: context parallelism inside pipeline "
                                     "stages is not built; set one of them to 1");
  MPIACCEL_CHECK(config.train.seq_len % (2 * cp) == 0,
                 "estimate-memory: [train] seq_len " + std::to_string(config.train.seq_len) +
                     " does not divide into the 2 x cp_size chunks of context parallelism");
  EstimateSettings settings;
  settings.world_size = static_cast<int>(world_size / tp / pp);
  settings.tp_size = static_cast<int>(tp);
  settings.sequence_parallel = config.parallelism.sequence_parallel;
  settings.cp_size = static_cast<int>(config.parallelism.cp_size);
  settings.optimizer_slots = optimizer_slots(config.optimizer);
  settings.gradient_as_bucket_view = config.ddp.gradient_as_bucket_view;
  settings.batch_size = config.train.split_batches  // the global batch, split
                            ? std::max<int64_t>(1, config.train.batch_size * cp / settings.world_size)
                            : config.train.batch_size;
  settings.activation_checkpointing = config.fsdp.activation_checkpointing;
  settings.reshard_after_forward =
      config.fsdp.reshard_after_forward && config.fsdp.sharding_strategy != ShardingStrategy::ShardGradOp;
  const detail::RowsOf rows_of = [&](const ModelFootprint& model) {
    std::vector<MemoryEstimate> rows;
    for (MixedPrecision precision : {MixedPrecision::No, MixedPrecision::Bf16, MixedPrecision::Fp16}) {
      for (StrategyKind strategy : {StrategyKind::Ddp, StrategyKind::Zero1, StrategyKind::Zero2, StrategyKind::Fsdp})
        rows.push_back(estimate_memory(model, spec, strategy, false, precision, settings));
      for (StrategyKind strategy : {StrategyKind::Zero1, StrategyKind::Zero2, StrategyKind::Fsdp})
        rows.push_back(estimate_memory(model, spec, strategy, true, precision, settings));
    }
    return rows;
  };
  if (pp > 1) return detail::estimate_pipeline(config, spec, settings, rows_of);
  return rows_of(model_footprint(config.train.model, spec, tp));
}

}  // namespace mpiaccel
