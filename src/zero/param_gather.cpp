// All-gather of updated parameter rows after a ZeRO step (see param_gather.hpp).

#include "zero/param_gather.hpp"

#include <ATen/core/grad_mode.h>
#include <ATen/ATen.h>

#include "grad_sync/bucket_layout.hpp"
#include "mpiaccel/comm.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel::detail {

struct ParamGather::InFlight {
  size_t bucket = 0;
  at::Tensor input, output;
  std::vector<int64_t> counts;
  WorkHandle work;
};

ParamGather::ParamGather(std::vector<at::Tensor> params, std::vector<ParamShard> shards,
                         std::shared_ptr<Communicator> comm, int64_t bucket_bytes)
    : params_(std::move(params)), shards_(std::move(shards)), comm_(std::move(comm)) {
  MPIACCEL_CHECK(comm_ && shards_.size() == params_.size(),
                 "ZeRO all-gather: one shard per parameter and a communicator needed");
  std::vector<size_t> order(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) order[i] = i;
  if (!params_.empty()) buckets_ = assign_buckets(grad_infos(params_), order, bucket_bytes, bucket_bytes);
}

at::Tensor ParamGather::staging(at::Tensor& area, int64_t numel, const at::TensorOptions& options) {
  const int64_t bytes = numel * static_cast<int64_t>(options.dtype().itemsize());
  if (!area.defined() || area.device() != options.device() || area.numel() < bytes)
    area = at::empty({bytes}, options.dtype(at::kByte));
  return area.narrow(0, 0, bytes).view(options.dtype().toScalarType());
}

ParamGather::InFlight ParamGather::launch(size_t b, const std::vector<at::Tensor>& own_rows) {
  const int rank = comm_->rank(), world = comm_->size();
  InFlight flight;
  flight.bucket = b;
  flight.counts.assign(world, 0);
  for (size_t i : buckets_[b])
    for (int r = 0; r < world; ++r) flight.counts[r] += shards_[i].numel(r);
  int64_t total = 0;
  for (int64_t c : flight.counts) total += c;
  const at::TensorOptions options = params_[buckets_[b].front()].options().requires_grad(false);
  flight.input = staging(input_areas_[b % 2], flight.counts[rank], options);
  flight.output = staging(output_areas_[b % 2], total, options);
  int64_t offset = 0;
  for (size_t i : buckets_[b]) {
    const int64_t count = shards_[i].numel(rank);
    const at::Tensor& src = own_rows[i];
    MPIACCEL_CHECK(src.numel() == count, "ZeRO all-gather: parameter " + std::to_string(i) +
                                             " has " + std::to_string(src.numel()) +
                                             " updated elements, its shard " + std::to_string(count));
    // Host master → device: asynchronous from pinned memory; the communicator
    // orders its collective after the current stream's work.
    flight.input.narrow(0, offset, count).copy_(src.reshape({-1}), /*non_blocking=*/src.device().is_cpu() && src.is_pinned());
    offset += count;
  }
  flight.work = comm_->all_gather_uneven_async(flight.output, flight.input, flight.counts);
  return flight;
}

void ParamGather::finish(InFlight& flight, const std::vector<at::Tensor>& own_rows) {
  const int rank = comm_->rank(), world = comm_->size();
  flight.work->wait();
  const std::vector<size_t>& members = buckets_[flight.bucket];
  int64_t offset = 0;
  for (int r = 0; r < world; ++r)
    for (size_t i : members) {
      const int64_t count = shards_[i].numel(r);
      // This rank's rows are already in place when the step updated a view of the parameter.
      const bool in_place = r == rank && own_rows[i].is_alias_of(params_[i]);
      if (count > 0 && !in_place) {
        at::Tensor dst = flat_rows(params_[i].detach(), shards_[i], r);
        dst.copy_(flight.output.narrow(0, offset, count));
      }
      offset += count;
    }
}

void ParamGather::gather(const std::vector<at::Tensor>& own_rows) {
  MPIACCEL_CHECK(own_rows.size() == params_.size(),
                 "ZeRO all-gather: one tensor of updated rows per parameter needed");
  at::NoGradGuard no_grad;
  if (buckets_.empty()) return;
  InFlight current = launch(0, own_rows);
  for (size_t b = 0; b < buckets_.size(); ++b) {
    InFlight next;
    if (b + 1 < buckets_.size()) next = launch(b + 1, own_rows);
    finish(current, own_rows);
    current = std::move(next);
  }
}

}  // namespace mpiaccel::detail
