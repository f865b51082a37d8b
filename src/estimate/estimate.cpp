// The ZeRO paper's per-rank model-state accounting, per strategy and
// precision (the table is in include/mpiaccel/estimate.hpp).

#include <string>
#include <vector>

#include "mpiaccel/error.hpp"
#include "mpiaccel/estimate.hpp"

namespace mpiaccel {
namespace {

constexpr int64_t kFp32 = 4;

// Ψ·bytes/N rounded up: a rank holds at most ceil(Ψ/N) elements of a shard.
int64_t shard(int64_t elements, int64_t bytes, int world) {
  return (elements + world - 1) / world * bytes;
}

}  // namespace

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
  row.world_size = settings.world_size;
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
  // Offloaded: fp32 master, fp32 gradient shard and the slots on the host.
  const int64_t host_per_param = 2 * kFp32 + settings.optimizer_slots * kFp32;

  if (row.strategy == "ddp") {
    MPIACCEL_CHECK(!offload, "estimate-memory: DDP offloads nothing");
    row.param_bytes = p * psi;
    row.grad_bytes = g * psi * (settings.gradient_as_bucket_view ? 1 : 2);
    row.optimizer_bytes = k * psi;
  } else if (row.strategy == "zero1" || row.strategy == "zero2") {
    row.param_bytes = p * psi;
    row.grad_bytes = row.strategy == "zero1" ? g * psi : shard(psi, g, n);
    if (offload) {
      row.host_bytes = shard(psi, host_per_param, n);
    } else {
      row.optimizer_bytes = shard(psi, k, n);
    }
  } else if (row.strategy == "fsdp") {
    const int64_t sharded = psi - model.root_params;
    // The root stays gathered; the largest unit plus the prefetched next one
    // are gathered around their forward and backward.
    row.gathered_bytes = (model.units > 1 ? 2 : 1) * p * model.largest_unit_params;
    if (model.units == 0) row.gathered_bytes = 0;
    if (offload) {
      row.param_bytes = p * model.root_params;
      row.host_bytes = shard(sharded, host_per_param, n) + shard(model.root_params, host_per_param, n);
    } else {
      row.param_bytes = shard(psi, p, n) + p * model.root_params;
      row.grad_bytes = shard(psi, g, n);
      row.optimizer_bytes = shard(psi, k, n);
    }
  } else {
    MPIACCEL_THROW("strategy '" + strategy + "' is unknown; accepted: ddp, zero1, zero2, zero3, fsdp");
  }
  row.activation_bytes = activation_bytes(model.kind, spec, settings.batch_size, p, settings.activation_checkpointing);
  return row;
}

std::vector<MemoryEstimate> estimate_all(const Config& config, int world_size) {
  const ModelSpec spec = ModelSpec::from(config.model, config.train.seq_len);
  const ModelFootprint model = model_footprint(config.train.model, spec);
  EstimateSettings settings;
  settings.world_size = world_size;
  settings.optimizer_slots = optimizer_slots(config.optimizer);
  settings.gradient_as_bucket_view = config.ddp.gradient_as_bucket_view;
  settings.batch_size = config.train.batch_size;
  settings.activation_checkpointing = config.fsdp.activation_checkpointing;
  std::vector<MemoryEstimate> rows;
  for (const char* precision : {"fp32", "bf16", "fp16"}) {
    for (const char* strategy : {"ddp", "zero1", "zero2", "fsdp"})
      rows.push_back(estimate_memory(model, spec, strategy, false, precision, settings));
    for (const char* strategy : {"zero1", "zero2", "fsdp"})
      rows.push_back(estimate_memory(model, spec, strategy, true, precision, settings));
  }
  return rows;
}

}  // namespace mpiaccel
