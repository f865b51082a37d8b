#include "accelerator/run_strategy.hpp"

#include <memory>
#include <string>

#include "mpiaccel/comm.hpp"
#include "mpiaccel/config.hpp"
#include "mpiaccel/ddp.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/fsdp.hpp"
#include "mpiaccel/precision.hpp"
#include "mpiaccel/strategy.hpp"
#include "mpiaccel/zero.hpp"

namespace mpiaccel {
namespace {

// A [ddp] comm_hook under a sharding strategy would be ignored: refused instead.
void check_comm_hook_applies(const Config& config, StrategyKind kind) {
  const std::string& hook = config.ddp.comm_hook;
  if (hook == "none" || hook == "no" || kind == StrategyKind::Ddp || kind == StrategyKind::NoDist) return;
  MPIACCEL_THROW("[ddp] comm_hook = " + hook + " reduces DDP's gradient buckets, but [distributed] strategy = " +
                 config.distributed.strategy + " reduce-scatters shards: set strategy = ddp, or comm_hook = none");
}

// ZeRO++ works on stage 3's parameter gathers and gradient reduce-scatters;
// stages 0 to 2 gather no parameters in forward.
void refuse_zero_plus_plus_below_stage_3(const ZeroConfig& zero) {
  const char* asked = zero.quantized_weights         ? "quantized_weights (ZeRO++ qwZ)"
                      : zero.quantized_gradients     ? "quantized_gradients (ZeRO++ qgZ)"
                      : zero.secondary_partition_size != 1 ? "secondary_partition_size (ZeRO++ hpZ)"
                                                     : nullptr;
  if (!asked) return;
  MPIACCEL_THROW("[zero] " + std::string(asked) + " works on stage 3's sharded parameters; stage " +
                 std::to_string(zero.stage) + " shards none: set stage = 3, or switch ZeRO++ off "
                 "(quantized_weights = false, quantized_gradients = false, secondary_partition_size = 1)");
}

}  // namespace

std::unique_ptr<Strategy> make_strategy(const Config& config, std::shared_ptr<Communicator> comm) {
  const PrecisionPolicy precision = PrecisionPolicy::from_config(config.distributed);
  check_comm_hook_applies(config, strategy_kind(config));
  switch (strategy_kind(config)) {
    case StrategyKind::NoDist:
      MPIACCEL_CHECK(comm->size() == 1,
                     "[distributed] strategy = no runs one process, but the world has " +
                         std::to_string(comm->size()) +
                         " ranks: set strategy = ddp (or fsdp/zero), or launch one rank");
      return make_no_dist_strategy(std::move(comm));
    case StrategyKind::Ddp:
      // ZeRO stage 0 too: plain DDP, with the user's [ddp] keys.
      MPIACCEL_CHECK(config.distributed.strategy != "zero" ||
                         (config.zero.offload_optimizer == "none" && config.zero.offload_param == "none"),
                     "[zero] stage = 0 is plain DDP and offloads nothing: set offload_optimizer = "
                     "none and offload_param = none, or use stage 1 or 2");
      if (config.distributed.strategy == "zero") refuse_zero_plus_plus_below_stage_3(config.zero);
      return make_ddp_strategy(config.ddp, std::move(comm), precision);
    case StrategyKind::Zero1:
    case StrategyKind::Zero2:
      refuse_zero_plus_plus_below_stage_3(config.zero);
      return make_zero_strategy(config.zero, std::move(comm), precision);
    case StrategyKind::Fsdp:
      return make_fsdp_strategy(config.fsdp, std::move(comm), "fsdp", precision);
    case StrategyKind::Zero3: {
      // ZeRO-3 is FSDP full shard: the same machinery, not a second copy.
      FsdpConfig full_shard = config.fsdp;
      full_shard.sharding_strategy = "FULL_SHARD";
      full_shard.reshard_after_forward = true;
      full_shard.cpu_offload = config.zero.offload_param == "cpu";
      full_shard.quantized_weights = config.fsdp.quantized_weights || config.zero.quantized_weights;
      full_shard.quantized_gradients = config.fsdp.quantized_gradients || config.zero.quantized_gradients;
      if (config.zero.secondary_partition_size != 1)
        full_shard.secondary_partition_size = config.zero.secondary_partition_size;
      return make_fsdp_strategy(full_shard, std::move(comm), "zero3", precision);
    }
  }
  MPIACCEL_THROW("unreachable strategy kind");
}

namespace detail {
namespace {

// Whether a sharding strategy over one rank computes exactly what one
// process does. A cast of parameters or gradients (param, reduce or buffer
// dtype other than fp32), offloading and ZeRO++'s quantization are defined
// by the sharded path: those keep it.
bool one_process_computes_it(const Config& config, StrategyKind kind) {
  const PrecisionPolicy precision = PrecisionPolicy::from_config(config.distributed);
  const bool fp32 = precision.param_dtype == at::kFloat && precision.reduce_dtype == at::kFloat &&
                    precision.buffer_dtype == at::kFloat;
  const FsdpConfig& fsdp = config.fsdp;
  const ZeroConfig& zero = config.zero;
  switch (kind) {
    case StrategyKind::Zero1:
    case StrategyKind::Zero2:
      return fp32 && zero.offload_optimizer == "none";
    case StrategyKind::Fsdp:
      return fp32 && !fsdp.cpu_offload && !fsdp.quantized_weights && !fsdp.quantized_gradients &&
             fsdp.secondary_partition_size == 1;
    case StrategyKind::Zero3:
      return fp32 && zero.offload_param == "none" && zero.offload_optimizer == "none" && !fsdp.quantized_weights &&
             !fsdp.quantized_gradients && !zero.quantized_weights && !zero.quantized_gradients &&
             fsdp.secondary_partition_size == 1 && zero.secondary_partition_size == 1;
    case StrategyKind::NoDist:
    case StrategyKind::Ddp:
      return false;
  }
  return false;
}

}  // namespace

std::unique_ptr<Strategy> make_run_strategy(const Config& config, std::shared_ptr<Communicator> comm,
                                            bool* one_process) {
  // Built first in any case: its checks (and their messages) are the same.
  std::unique_ptr<Strategy> strategy = make_strategy(config, comm);
  *one_process = comm->size() == 1 && one_process_computes_it(config, strategy_kind(config));
  if (!*one_process) return strategy;
  return make_no_dist_strategy(std::move(comm), strategy->name());
}

}  // namespace detail
}  // namespace mpiaccel
