// The strategies by name (strategies.hpp, run_strategy.hpp).

#include "strategies/run_strategy.hpp"

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
namespace detail {

std::unique_ptr<Strategy> make_strategy(const StrategyPlan& plan, const PrecisionPolicy& precision,
                                        std::shared_ptr<Communicator> comm) {
  switch (plan.kind) {
    case StrategyKind::NoDist:
      MPIACCEL_CHECK(comm->size() == 1,
                     "[distributed] strategy = no runs one process, but its data-parallel group has " +
                         std::to_string(comm->size()) +
                         " ranks: set strategy = ddp (or fsdp/zero), or launch one rank per data-parallel group");
      return make_no_dist_strategy(std::move(comm));
    case StrategyKind::Ddp: return make_ddp_strategy(plan.ddp, std::move(comm), precision);
    case StrategyKind::Zero1:
    case StrategyKind::Zero2: return make_zero_strategy(plan.zero, std::move(comm), precision);
    case StrategyKind::Fsdp:
    case StrategyKind::Zero3:
      return make_fsdp_strategy(plan.fsdp, std::move(comm), strategy_name(plan.kind), precision);
  }
  MPIACCEL_THROW("unreachable strategy kind");
}

}  // namespace detail

std::unique_ptr<Strategy> make_strategy(const Config& config, std::shared_ptr<Communicator> comm) {
  return detail::make_strategy(resolve_strategy(config), PrecisionPolicy::from_config(config.distributed),
                               std::move(comm));
}

namespace detail {
namespace {

// Whether a sharding strategy over one rank computes exactly what one
// process does. A cast of parameters or gradients (param, reduce or buffer
// dtype other than fp32), offloading and ZeRO++'s quantization are defined
// by the sharded path: those keep it.
bool one_process_computes_it(const StrategyPlan& plan, const PrecisionPolicy& precision) {
  const bool fp32 = precision.param_dtype == at::kFloat && precision.reduce_dtype == at::kFloat &&
                    precision.buffer_dtype == at::kFloat;
  switch (plan.kind) {
    case StrategyKind::Zero1:
    case StrategyKind::Zero2:
      return fp32 && plan.zero.offload_optimizer == OffloadChoice::None;
    case StrategyKind::Zero3:
      if (plan.zero.offload_optimizer != OffloadChoice::None) return false;
      [[fallthrough]];
    case StrategyKind::Fsdp:
      return fp32 && !plan.fsdp.cpu_offload && !plan.fsdp.quantized_weights && !plan.fsdp.quantized_gradients &&
             plan.fsdp.secondary_partition_size == 1;
    case StrategyKind::NoDist:
    case StrategyKind::Ddp:
      return false;
  }
  return false;
}

}  // namespace

std::unique_ptr<Strategy> make_run_strategy(const StrategyPlan& plan, const PrecisionPolicy& precision,
                                            std::shared_ptr<Communicator> comm, bool* one_process) {
  // Built first in any case: its checks (and their messages) are the same.
  std::unique_ptr<Strategy> strategy = make_strategy(plan, precision, comm);
  *one_process = comm->size() == 1 && one_process_computes_it(plan, precision);
  if (!*one_process) return strategy;
  return make_no_dist_strategy(std::move(comm), strategy->name());
}

std::unique_ptr<Strategy> make_run_strategy(const Config& config, std::shared_ptr<Communicator> comm,
                                            bool* one_process) {
  return make_run_strategy(resolve_strategy(config), PrecisionPolicy::from_config(config.distributed),
                           std::move(comm), one_process);
}

}  // namespace detail
}  // namespace mpiaccel
