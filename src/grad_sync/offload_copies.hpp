#pragma once
// The device<->host copies of optimizer offload (ZeRO offload_optimizer,
// FSDP cpu_offload), asynchronous and pipelined with the host step.
//
// All copies run on one side stream of the device (the copy engines work
// beside compute kernels) into or out of pinned host memory:
//   - to_host() starts a gradient's copy down once the work the caller queued
//     so far (the reduction that produced it) is done, and remembers an event;
//   - wait_landed() blocks the host until that one copy has landed, so the
//     host step of parameter i runs while i+1, i+2, ... are still coming;
//   - to_device() starts a stepped parameter's copy up right after its step,
//     so it travels while the host steps the next one;
//   - finish() makes the caller's stream wait for every copy up before
//     anything (the all-gather) reads the parameters.
// On the CPU (parameters on the host) every copy happens at once and the
// waits return at once: the same code runs either way.

#include <ATen/core/Tensor.h>

#include <chrono>
#include <optional>
#include <unordered_map>

#include "runtime/device_streams.hpp"

namespace mpiaccel::detail {

class OffloadCopies {
 public:
  /// `timeout`: how long wait_landed() waits before it fails.
  explicit OffloadCopies(std::chrono::milliseconds timeout) : timeout_(timeout) {}

  /// Starts copying `device` into `host` (same shape; pinned when `device`
  /// is on a GPU). Keyed by `host`.
  void to_host(const at::Tensor& host, const at::Tensor& device);
  /// Blocks until the to_host copy into `host` has landed (no-op if none).
  void wait_landed(const at::Tensor& host);
  /// Blocks until every to_host copy has landed.
  void wait_all_landed();
  /// Starts copying `host` into `device`.
  void to_device(const at::Tensor& device, const at::Tensor& host);
  /// The caller's current stream waits for every to_device copy.
  void finish();

 private:
  /// The side stream of `device` (one device per strategy).
  c10::Stream copy_stream(const at::Device& device);

  std::chrono::milliseconds timeout_;
  std::optional<c10::Stream> stream_;
  std::unordered_map<const void*, StreamEvent> landing_;
  bool uploaded_ = false;
};

}  // namespace mpiaccel::detail
