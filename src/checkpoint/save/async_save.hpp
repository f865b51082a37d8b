#pragma once
// Internal: an asynchronous checkpoint save (Checkpointer::save_async,
// docs/checkpoint.md "Asynchronous save").
//
// The training stall is the snapshot alone: every tensor of the state is
// copied into a host staging buffer of its own (kept from save to save, so no
// page is faulted in again; pinned where the tensor is on a GPU, and the
// device→host copies all queued before one wait). Then a thread of its own
// runs the ordinary collective save on the snapshot — the same code as a
// synchronous save, with its own duplicate communicator for agreement and the
// Checkpointer's file communicator for MPI-IO, so nothing it does interleaves
// with training's collectives — while training goes on. Every HDF5 call of a
// save in flight is made on that thread (this HDF5 is not thread-safe); the
// Checkpointer waits for it before any other checkpoint operation.
//
// At most one save is in flight: starting another waits for the first. Its
// result is taken at a step boundary by poll() (collective: the ranks agree
// that every one of them has finished, then every rank throws the same error
// if it failed) or wait(). Until the writer commits, the previous committed
// checkpoint and `latest` are untouched; a failure removes its .tmp file.

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "mpiaccel/checkpoint.hpp"
#include "mpiaccel/comm.hpp"

namespace mpiaccel::detail {

class AsyncSave {
 public:
  /// The save on the snapshot: (staged state, step, meta) -> committed path.
  using Write = std::function<std::string(const ShardedStateDict&, int64_t, const CheckpointMeta&)>;

  /// `comm`: training's communicator, over which poll() and wait() agree.
  explicit AsyncSave(std::shared_ptr<Communicator> comm) : comm_(std::move(comm)) {}
  /// Waits for a save in flight; logs (never throws) its error.
  ~AsyncSave();
  AsyncSave(const AsyncSave&) = delete;
  AsyncSave& operator=(const AsyncSave&) = delete;

  /// Snapshots `state` (the stall) and starts `write` on it in the
  /// background. Nothing may be in flight (wait() first). Local.
  void start(const ShardedStateDict& state, int64_t step, CheckpointMeta meta, Write write);
  bool in_flight() const { return writer_.joinable(); }
  /// Whether nothing is in flight any more: when every rank's writer has
  /// finished, joins it and throws its error on every rank. Collective over
  /// comm while a save is in flight (every rank calls it at the same step
  /// boundaries); nothing to do otherwise.
  bool poll();
  /// Waits for the save in flight and throws its error on every rank.
  /// Collective over comm.
  void wait();
  /// The path the save in flight (or the last one) commits.
  const std::string& path() const { return path_; }

 private:
  void finish();
  /// The staging buffer of `name` for a tensor like `like`, reused.
  at::Tensor staging_for(const std::string& name, const at::Tensor& like);

  std::shared_ptr<Communicator> comm_;
  std::map<std::string, at::Tensor> staging_;
  ShardedStateDict staged_;
  std::thread writer_;
  std::atomic<bool> done_{false};
  std::string error_;  // written by the writer before done_
  std::string path_;
};

}  // namespace mpiaccel::detail
