// Pinning a batch and copying it to the device (see batch_transfer.hpp).

#include "data/batch_transfer.hpp"

#include <ATen/ATen.h>

#include "runtime/device_streams.hpp"

namespace mpiaccel::detail {
namespace {

// Applies `f` to the input and the target, once when they are one tensor
// (a reconstruction's target is its input).
template <typename F>
Batch each_tensor(const Batch& batch, F f) {
  Batch out;
  out.input = batch.input.defined() ? f(batch.input) : batch.input;
  out.target = batch.target.is_same(batch.input) ? out.input
               : batch.target.defined()           ? f(batch.target)
                                                  : batch.target;
  return out;
}

}  // namespace

Batch pinned(const Batch& batch) {
  return each_tensor(batch, [](const at::Tensor& t) { return t.is_pinned() ? t : t.pin_memory(); });
}

Batch to_device(const Batch& batch, const at::Device& device, bool non_blocking) {
  if (!non_blocking || !has_streams(device))
    return each_tensor(batch, [&](const at::Tensor& t) { return t.to(device); });
  const c10::Stream compute = current_stream(device);
  const c10::Stream copy = side_stream(device);
  Batch out;
  {
    const StreamScope on_copy(copy);
    out = each_tensor(batch, [&](const at::Tensor& t) { return t.to(device, /*non_blocking=*/true); });
  }
  StreamEvent::record(copy).block(compute);
  // Allocated for the copy stream, used on the compute stream: the allocator
  // must not hand the memory out again before the compute stream is done.
  keep_alive_on(out.input, compute);
  if (!out.target.is_same(out.input)) keep_alive_on(out.target, compute);
  return out;
}

}  // namespace mpiaccel::detail
