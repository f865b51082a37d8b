// Device-generic streams and events (see device_streams.hpp).

#include "runtime/device_streams.hpp"

#include <ATen/ATen.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <thread>

#include "mpiaccel/error.hpp"

namespace mpiaccel::detail {

bool has_streams(const at::Device& device) {
  return device.type() != c10::DeviceType::CPU && c10::impl::hasDeviceGuardImpl(device.type());
}

void set_current_device(const at::Device& device) {
  if (has_streams(device)) c10::impl::VirtualGuardImpl(device.type()).setDevice(device);
}

c10::Stream current_stream(const at::Device& device) {
  if (!has_streams(device)) return c10::Stream(c10::Stream::DEFAULT, at::Device(at::kCPU));
  return c10::impl::VirtualGuardImpl(device.type()).getStream(device);
}

c10::Stream side_stream(const at::Device& device, bool high_priority) {
  if (!has_streams(device)) return current_stream(device);
  return c10::impl::VirtualGuardImpl(device.type()).getStreamFromGlobalPool(device, high_priority);
}

void keep_alive_on(const at::Tensor& tensor, const c10::Stream& stream) {
  if (!tensor.defined() || !has_streams(tensor.device())) return;
  c10::impl::VirtualGuardImpl(stream.device_type())
      .recordDataPtrOnStream(tensor.storage().data_ptr(), stream);
}

StreamScope::StreamScope(const c10::Stream& stream) {
  if (has_streams(stream.device())) guard_.emplace(stream);
}

StreamEvent StreamEvent::record(const c10::Stream& stream) {
  StreamEvent event;
  if (!has_streams(stream.device())) return event;
  event.event_ = std::make_shared<c10::Event>(stream.device_type());
  event.event_->record(stream);
  return event;
}

StreamEvent StreamEvent::record_current(const at::Device& device) {
  return record(current_stream(device));
}

void StreamEvent::block(const c10::Stream& stream) const {
  if (event_ && has_streams(stream.device())) event_->block(stream);
}

bool StreamEvent::reached() const { return !event_ || event_->query(); }

void StreamEvent::wait_host(std::chrono::milliseconds timeout, const std::string& what) const {
  if (reached()) return;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // Polled: c10::Event has no blocking wait in every LibTorch we build with.
  while (!reached()) {
    MPIACCEL_CHECK(std::chrono::steady_clock::now() < deadline,
                   what + " did not finish on the device within " +
                       std::to_string(timeout.count()) + " ms");
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

at::Tensor staging_empty(at::IntArrayRef sizes, at::ScalarType dtype, const at::Device& device) {
  return at::empty(sizes, at::TensorOptions().dtype(dtype).pinned_memory(device.is_cuda()));
}

}  // namespace mpiaccel::detail
