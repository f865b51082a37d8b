#include <memory>

#include "mpiaccel/comm.hpp"
#include "mpiaccel/config.hpp"
#include "mpiaccel/ddp.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/strategy.hpp"

namespace mpiaccel {

std::unique_ptr<Strategy> make_strategy(const Config& config, std::shared_ptr<Communicator> comm) {
  const auto& name = config.distributed.strategy;
  if (name == "no") {
    MPIACCEL_CHECK(comm->size() == 1,
                   "[distributed] strategy = no runs one process, but the world has " +
                       std::to_string(comm->size()) +
                       " ranks: set strategy = ddp (or fsdp/zero), or launch one rank");
    return make_no_dist_strategy(std::move(comm));
  }
  if (name == "ddp") return make_ddp_strategy(config.ddp, std::move(comm));
  MPIACCEL_THROW("[distributed] strategy = " + name +
                 " is not available in this build yet; accepted now: no|ddp");
}

}  // namespace mpiaccel
