// Strategy's defaults.

#include "mpiaccel/strategy.hpp"

#include "mpiaccel/error.hpp"

namespace mpiaccel {

void Strategy::register_comm_hook(std::shared_ptr<CommHook> /*hook*/) {
  MPIACCEL_CHECK(false, "comm hooks reduce DDP's gradient buckets; the " + name() +
                            " strategy has none. Set [distributed] strategy = ddp, or drop the hook");
}

}  // namespace mpiaccel
