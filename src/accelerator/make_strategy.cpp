#include <memory>

#include "mpiaccel/comm.hpp"
#include "mpiaccel/config.hpp"
#include "mpiaccel/ddp.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/fsdp.hpp"
#include "mpiaccel/precision.hpp"
#include "mpiaccel/strategy.hpp"
#include "mpiaccel/zero.hpp"

namespace mpiaccel {

std::unique_ptr<Strategy> make_strategy(const Config& config, std::shared_ptr<Communicator> comm) {
  const auto& name = config.distributed.strategy;
  const PrecisionPolicy precision = PrecisionPolicy::from_config(config.distributed);
  if (name == "no") {
    MPIACCEL_CHECK(comm->size() == 1,
                   "[distributed] strategy = no runs one process, but the world has " +
                       std::to_string(comm->size()) +
                       " ranks: set strategy = ddp (or fsdp/zero), or launch one rank");
    return make_no_dist_strategy(std::move(comm));
  }
  if (name == "ddp") return make_ddp_strategy(config.ddp, std::move(comm), precision);
  if (name == "fsdp") return make_fsdp_strategy(config.fsdp, std::move(comm), "fsdp", precision);
  if (name == "zero") {
    if (config.zero.stage == 3) {
      // ZeRO-3 is FSDP full shard: the same machinery, not a second copy.
      FsdpConfig full_shard = config.fsdp;
      full_shard.sharding_strategy = "FULL_SHARD";
      full_shard.reshard_after_forward = true;
      full_shard.cpu_offload = config.zero.offload_param == "cpu";
      return make_fsdp_strategy(full_shard, std::move(comm), "zero3", precision);
    }
    return make_zero_strategy(config.zero, std::move(comm), precision);
  }
  MPIACCEL_THROW("unknown [distributed] strategy '" + name + "'; accepted: no|ddp|fsdp|zero");
}

}  // namespace mpiaccel
