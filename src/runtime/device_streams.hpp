#pragma once
// Streams and events of whatever device a tensor lives on, through c10's
// device-generic interface (c10::Stream, c10::Event, the DeviceGuardImpl a
// CUDA LibTorch registers at load time). Code above the communicators orders
// its side-stream work with these, so it is written once for the CPU and the
// GPU: on a CPU tensor every call is a no-op (the CPU has one in-order
// "stream": the calling thread), and no #ifdef is needed anywhere.
//
// The rules these serve (docs/comm.md, "The NCCL communicator"):
//   - work on a side stream starts only after an event recorded on the
//     producer's stream (the compute stream) when its input was ready;
//   - the compute stream waits on the side stream's completion event before
//     anything reads the result;
//   - memory used on a side stream is marked for it (recordStream), so the
//     caching allocator does not hand it out again while the side stream may
//     still touch it.

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/Event.h>
#include <c10/core/Stream.h>

#include <c10/core/StreamGuard.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

namespace mpiaccel::detail {

/// True for a device with streams and events (CUDA), false for the CPU.
bool has_streams(const at::Device& device);

/// Makes `device` the calling thread's current device (no-op on the CPU).
void set_current_device(const at::Device& device);

/// The calling thread's current stream on `device` (the compute stream).
c10::Stream current_stream(const at::Device& device);

/// A stream of the device's pool, distinct from the default stream: copies
/// and collectives put there run beside compute. The CPU's only stream on
/// the CPU.
c10::Stream side_stream(const at::Device& device, bool high_priority = false);

/// The allocator may not reuse `tensor`'s memory until the work queued on
/// `stream` so far has finished. No-op on the CPU.
void keep_alive_on(const at::Tensor& tensor, const c10::Stream& stream);

/// Makes `stream` current for a scope (c10::StreamGuard); nothing on the CPU.
class StreamScope {
 public:
  explicit StreamScope(const c10::Stream& stream);

 private:
  std::optional<c10::StreamGuard> guard_;
};

/// A point in a stream's work (copies share it). Default-constructed or on
/// the CPU it is already reached: every call returns at once.
class StreamEvent {
 public:
  StreamEvent() = default;
  /// Records the event at the current end of `stream`'s queued work.
  static StreamEvent record(const c10::Stream& stream);
  /// Records on the calling thread's current stream of `device`.
  static StreamEvent record_current(const at::Device& device);

  /// Work queued on `stream` after this call waits for the event (device
  /// side; the host does not block).
  void block(const c10::Stream& stream) const;
  /// Whether the event has been reached (never blocks).
  bool reached() const;
  /// Blocks the host until the event is reached; throws mpiaccel::Error
  /// naming `what` when `timeout` passes first (a collective queued before
  /// it never completed: the communicator's watcher aborts such jobs).
  void wait_host(std::chrono::milliseconds timeout, const std::string& what) const;

 private:
  std::shared_ptr<c10::Event> event_;
};

/// Host memory for `sizes` of `dtype` that `device`'s copies can use
/// asynchronously: pinned (page-locked) for a CUDA device, plain otherwise.
at::Tensor staging_empty(at::IntArrayRef sizes, at::ScalarType dtype, const at::Device& device);

}  // namespace mpiaccel::detail
