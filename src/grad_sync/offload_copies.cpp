// Pipelined offload copies (see offload_copies.hpp).

#include "grad_sync/offload_copies.hpp"

#include <ATen/ATen.h>

namespace mpiaccel::detail {

c10::Stream OffloadCopies::copy_stream(const at::Device& device) {
  if (!stream_) stream_ = side_stream(device);
  return *stream_;
}

void OffloadCopies::to_host(const at::Tensor& host, const at::Tensor& device) {
  if (!has_streams(device.device())) {
    host.copy_(device);
    return;
  }
  const c10::Stream stream = copy_stream(device.device());
  // After the reduction that produced the gradient, on the caller's stream.
  StreamEvent::record_current(device.device()).block(stream);
  StreamScope on_copy_stream(stream);
  host.copy_(device, /*non_blocking=*/true);
  keep_alive_on(device, stream);
  landing_[host.unsafeGetTensorImpl()] = StreamEvent::record(stream);
}

void OffloadCopies::wait_landed(const at::Tensor& host) {
  auto it = landing_.find(host.unsafeGetTensorImpl());
  if (it == landing_.end()) return;
  it->second.wait_host(timeout_, "an offloaded gradient's device-to-host copy");
  landing_.erase(it);
}

void OffloadCopies::wait_all_landed() {
  for (auto& [key, event] : landing_)
    event.wait_host(timeout_, "an offloaded gradient's device-to-host copy");
  landing_.clear();
}

void OffloadCopies::to_device(const at::Tensor& device, const at::Tensor& host) {
  if (!has_streams(device.device())) {
    device.copy_(host);
    return;
  }
  const c10::Stream stream = copy_stream(device.device());
  if (!uploaded_) {
    // The parameters may still be read by kernels queued on the caller's
    // stream (the last backward): the copies up come after them.
    StreamEvent::record_current(device.device()).block(stream);
    uploaded_ = true;
  }
  StreamScope on_copy_stream(stream);
  device.copy_(host, /*non_blocking=*/true);
  keep_alive_on(device, stream);
}

void OffloadCopies::finish() {
  if (stream_ && uploaded_) StreamEvent::record(*stream_).block(current_stream(stream_->device()));
  uploaded_ = false;
}

}  // namespace mpiaccel::detail
