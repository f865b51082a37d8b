// The zigzag layout and the names of the exchanges (context_parallel.hpp).

#include <ATen/ATen.h>

#include <string>

#include "mpiaccel/comm.hpp"
#include "mpiaccel/context_parallel.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel::cp {

Exchange exchange_named(const std::string& name) {
  if (name == "ring") return Exchange::Ring;
  if (name == "alltoall") return Exchange::AllToAll;
  MPIACCEL_THROW("[parallelism] cp_comm_strategy = " + name + " is unknown; accepted: ring, alltoall");
}

const char* exchange_name(Exchange exchange) { return exchange == Exchange::Ring ? "ring" : "alltoall"; }

namespace {
int64_t chunk_length(int64_t time, const Communicator& group) {
  const int64_t chunks = 2 * group.size();
  MPIACCEL_CHECK(time % chunks == 0, "context parallelism cuts the sequence into 2 x cp_size = " +
                                         std::to_string(chunks) + " chunks, but it has " + std::to_string(time) +
                                         " positions; make [train] seq_len a multiple of " + std::to_string(chunks));
  return time / chunks;
}
}  // namespace

int64_t shard_length(int64_t time, const Communicator& group) { return 2 * chunk_length(time, group); }

at::Tensor zigzag_shard(const at::Tensor& x, int64_t dim, const Communicator& group) {
  const int64_t chunk = chunk_length(x.size(dim), group);
  const int64_t r = group.rank(), last = 2 * group.size() - 1;
  return at::cat({x.narrow(dim, r * chunk, chunk), x.narrow(dim, (last - r) * chunk, chunk)}, dim);
}

at::Tensor zigzag_positions(int64_t time, const Communicator& group, const at::TensorOptions& options) {
  const int64_t chunk = chunk_length(time, group);
  const int64_t r = group.rank(), last = 2 * group.size() - 1;
  const at::TensorOptions longs = options.dtype(at::kLong);
  return at::cat({at::arange(r * chunk, (r + 1) * chunk, longs), at::arange((last - r) * chunk, (last - r + 1) * chunk, longs)});
}

}  // namespace mpiaccel::cp
