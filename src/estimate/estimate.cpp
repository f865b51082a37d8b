// The ZeRO paper's per-rank model-state accounting, per strategy and
// precision (the table is in include/mpiaccel/estimate.hpp).

#include <string>
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
  if (optimizer.name == "adamw" || optimizer.name == "adam") return 2;
  if (optimizer.name == "sgd") return optimizer.momentum != 0.0 ? 1 : 0;
  MPIACCEL_THROW("[optimizer] name '" + optimizer.name + "' is unknown to estimate-memory; accepted: adamw, sgd");
}

MemoryEstimate estimate_memory(const ModelFootprint& model, const ModelSpec& spec, const std::string& strategy,
                               bool offload, const std::string& precision, const EstimateSettings& settings) {
  MPIACCEL_CHECK(settings.world_size >= 1, "estimate-memory: the world size must be at least 1");
  MemoryEstimate row;
  row.strategy = strategy == "zero3" ? "fsdp" : strategy;
  row.offload = offload;
  row.precision = precision == "no" ? "fp32" : precision;
  row.world_size = settings.world_size * settings.tp_size;
  row.tp_size = settings.tp_size;
  const int n = settings.world_size;
  const int64_t psi = model.params;

  int64_t p = 0, k = 0;
  if (row.precision == "fp32") {
    p = kFp32;
    k = settings.optimizer_slots * kFp32;
  } else if (row.precision == "bf16" || row.precision == "fp16") {
    p = 2;
    k = kFp32 + settings.optimizer_slots * kFp32;  // the fp32 master rides with the optimizer
  } else {
    MPIACCEL_THROW("precision '" + precision + "' is unknown; accepted: fp32 (no), bf16, fp16");
  }
  const int64_t g = p;
  // The largest rank's rows of every parameter (torch.chunk), as the
  // strategies cut them.
  const int64_t shard = shard_elements(model, n);
  // Offloaded, on the host: the fp32 shard (master), its fp32 gradient and the slots.
  auto offload_shard = [&](MemoryEstimate& r, int64_t elements) {
    r.host_param_bytes += kFp32 * elements;
    r.host_grad_bytes += kFp32 * elements;
    r.host_optimizer_bytes += settings.optimizer_slots * kFp32 * elements;
  };

  if (row.strategy == "ddp") {
    MPIACCEL_CHECK(!offload, "estimate-memory: DDP offloads nothing");
    MPIACCEL_CHECK(settings.node_shared_ranks >= 1, "estimate-memory: node_shared_ranks must be >= 1");
    const int64_t own = settings.node_shared_ranks > 1 ? shard_elements(model, settings.node_shared_ranks) : psi;
    row.param_bytes = p * own;
    row.grad_bytes = g * psi * (settings.gradient_as_bucket_view ? 1 : 2);
    row.optimizer_bytes = k * own;
  } else if (row.strategy == "zero1" || row.strategy == "zero2") {
    row.param_bytes = p * psi;
    row.grad_bytes = row.strategy == "zero1" ? g * psi : g * shard;
    if (offload) {
      offload_shard(row, shard);
    } else {
      row.optimizer_bytes = k * shard;
    }
  } else if (row.strategy == "fsdp") {
    // The root stays gathered beside its shard. Around a unit's forward and
    // backward the largest unit and the prefetched next one are gathered;
    // without resharding after forward every unit is, from the end of
    // forward into backward.
    if (model.units > 0) {
      row.gathered_bytes = settings.reshard_after_forward
                               ? (model.units > 1 ? 2 : 1) * p * model.largest_unit_params
                               : p * (psi - model.root_params);
    }
    row.param_bytes = p * model.root_params;
    if (offload) {
      offload_shard(row, shard);
    } else {
      row.param_bytes += p * shard;
      row.grad_bytes = g * shard;
      row.optimizer_bytes = k * shard;
    }
  } else {
    MPIACCEL_THROW("strategy '" + strategy + "' is unknown; accepted: ddp, zero1, zero2, zero3, fsdp");
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
      config.fsdp.reshard_after_forward && config.fsdp.sharding_strategy != "SHARD_GRAD_OP";
  const detail::RowsOf rows_of = [&](const ModelFootprint& model) {
    std::vector<MemoryEstimate> rows;
    for (const char* precision : {"fp32", "bf16", "fp16"}) {
      for (const char* strategy : {"ddp", "zero1", "zero2", "fsdp"})
        rows.push_back(estimate_memory(model, spec, strategy, false, precision, settings));
      for (const char* strategy : {"zero1", "zero2", "fsdp"})
        rows.push_back(estimate_memory(model, spec, strategy, true, precision, settings));
    }
    return rows;
  };
  if (pp > 1) return detail::estimate_pipeline(config, spec, settings, rows_of);
  return rows_of(model_footprint(config.train.model, spec, tp));
}

}  // namespace mpiaccel
