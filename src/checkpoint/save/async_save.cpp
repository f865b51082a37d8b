// Asynchronous checkpoint saves (see async_save.hpp).

#include "checkpoint/save/async_save.hpp"

#include <ATen/ATen.h>

#include "checkpoint/collective_phases.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/log.hpp"
#include "runtime/device_streams.hpp"
#include "runtime/trace.hpp"

namespace mpiaccel::detail {

AsyncSave::~AsyncSave() {
  if (!writer_.joinable()) return;
  writer_.join();
  if (!error_.empty()) log_error("checkpoint: the background save of " + path_ + " failed: " + error_);
}

at::Tensor AsyncSave::staging_for(const std::string& name, const at::Tensor& like) {
  at::Tensor& buffer = staging_[name];
  if (!buffer.defined() || buffer.sizes() != like.sizes() || buffer.scalar_type() != like.scalar_type())
    buffer = staging_empty(like.sizes(), like.scalar_type(), like.device());
  return buffer;
}

void AsyncSave::start(const ShardedStateDict& state, int64_t step, CheckpointMeta meta, Write write) {
  MPIACCEL_CHECK(!in_flight(), "checkpoint: a save is still in flight; wait for it first");
  // The snapshot: every rank's tensors copied out before training touches
  // them again. Device tensors are copied asynchronously into pinned memory,
  // and one wait per device covers them all.
  staged_ = ShardedStateDict();
  staged_.attributes = state.attributes;
  std::map<c10::DeviceIndex, at::Device> devices;
  for (const ShardedTensor& t : state.tensors) {
    ShardedTensor copy = t;
    if (t.local.defined()) {
      copy.local = staging_for(t.name, t.local);
      copy.local.copy_(t.local, /*non_blocking=*/has_streams(t.local.device()));
      if (has_streams(t.local.device())) devices.emplace(t.local.device().index(), t.local.device());
    }
    staged_.tensors.push_back(std::move(copy));
  }
  for (const auto& [index, device] : devices)
    StreamEvent::record_current(device).wait_host(comm_->timeout(), "the checkpoint snapshot's copy");
  done_ = false;
  error_.clear();
  path_.clear();
  writer_ = std::thread([this, step, meta = std::move(meta), write = std::move(write)] {
    TraceScope span("checkpoint write (background)", TraceLane::Io);
    error_ = error_message_of([&] { path_ = write(staged_, step, meta); });
    done_ = true;
  });
}

bool AsyncSave::poll() {
  if (!in_flight()) return true;
  if (comm_->all_reduce_int(done_ ? 1 : 0, ReduceOp::Min) == 0) return false;
  finish();
  return true;
}

void AsyncSave::wait() {
  if (in_flight()) finish();
}

void AsyncSave::finish() {
  writer_.join();
  // The writers agreed on their errors among themselves (already naming the
  // failing rank): every rank throws the lowest failing rank's text as is.
  const std::string why = error_;
  error_.clear();
  const int64_t size = comm_->size();
  const int64_t first = comm_->all_reduce_int(why.empty() ? size : comm_->rank(), ReduceOp::Min);
  if (first == size) return;
  MPIACCEL_THROW(comm_->broadcast_bytes(why, static_cast<int>(first)));
}

}  // namespace mpiaccel::detail
