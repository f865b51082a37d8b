// The zigzag layout and the names of the exchanges (context_parallel.hpp).

#include <ATen/ATen.h>

#include <string>

#include "context_parallel/zigzag_chunks.hpp"
#include "mpiaccel/comm.hpp"
#include "mpiaccel/context_parallel.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel::cp {

void check_heads(Exchange exchange, int64_t heads, int64_t ranks) {
  MPIACCEL_CHECK(exchange != Exchange::AllToAll || heads % ranks == 0,
                 "[parallelism] cp_comm_strategy = alltoall splits the " + std::to_string(heads) +
                     " attention heads of a rank over the " + std::to_string(ranks) +
                     " cp ranks; make n_head a multiple of cp_size x tp_size, or use ring");
}

namespace {
int64_t chunk_length(int64_t time, int64_t size) {
  const int64_t chunks = 2 * size;
  MPIACCEL_CHECK(time % chunks == 0, "context parallelism cuts the sequence into 2 x cp_size = " +
                                         std::to_string(chunks) + " chunks, but it has " + std::to_string(time) +
                                         " positions; make [train] seq_len a multiple of " + std::to_string(chunks));
  return time / chunks;
}
}  // namespace

int64_t shard_length(int64_t time, const Communicator& group) { return 2 * chunk_length(time, group.size()); }

at::Tensor zigzag_shard(const at::Tensor& x, int64_t dim, const Communicator& group) {
  const int64_t chunk = chunk_length(x.size(dim), group.size());
  auto part = [&](int half) { return x.narrow(dim, detail::chunk_of(group.rank(), half, group.size()) * chunk, chunk); };
  return at::cat({part(0), part(1)}, dim);
}

at::Tensor zigzag_positions(int64_t time, const Communicator& group, const at::TensorOptions& options) {
  return detail::rank_positions(time, group.rank(), group.size(), options);
}

namespace detail {

at::Tensor rank_positions(int64_t time, int64_t rank, int64_t size, const at::TensorOptions& options) {
  const int64_t chunk = chunk_length(time, size);
  const at::TensorOptions longs = options.dtype(at::kLong);
  auto part = [&](int half) {
    const int64_t first = chunk_of(rank, half, size) * chunk;
    return at::arange(first, first + chunk, longs);
  };
  return at::cat({part(0), part(1)});
}

}  // namespace detail
}  // namespace mpiaccel::cp
