#pragma once
// GradSync: the backward state machine of every strategy that communicates
// gradients as backward runs. It is written once, here; a strategy supplies
// only what is sent and how (its policy, the virtual functions below):
//   - the DDP reducer (grad_sync/reducer.hpp): all-reduce of flat buckets (also
//     ZeRO-1's gradient path);
//   - ZeRO-2 (zero/grad_shard_reducer.hpp): reduce-scatter of padded buckets;
//   - FSDP (fsdp/fsdp_engine.hpp): reduce-scatter of one unit per bucket.
//
// What the engine does:
//   - A post hook on each parameter's gradient accumulator (GradReadyHooks)
//     reports a gradient ready. The first hook of a backward queues an engine
//     callback (Engine::queue_callback) that finishes the backward.
//   - Parameters are grouped into buckets, in launch order. In a synchronized
//     backward a ready gradient is staged into its bucket (policy: stage), and
//     buckets launch (policy: launch) strictly in index order once all their
//     gradients are in: a bucket that fills early waits for the ones before it,
//     so every rank issues the same sequence of collectives.
//   - When backward ends, the gradients whose hook did not fire are staged as
//     they are (an accumulated .grad or zeros), so every bucket launches on
//     every rank. A small status vector is all-reduced meanwhile:
//       MissingGradients::Forbid — one flag: some parameter got no gradient on
//         some rank. Then every rank throws the lowest failing rank's message
//         (all_ok), which names the parameter, instead of a hang.
//       MissingGradients::Allow — the used map ("the hook fired in this
//         backward or earlier in the no_sync window", summed over ranks); a
//         parameter no rank used keeps its .grad untouched. With
//         reuse_used_map (DDP's static_graph) the first map is kept.
//     Then the policy waits for its buckets (finish_buckets) and writes the
//     results (apply).
//   - set_gradient_sync(false) (no_sync): nothing is staged or sent; the
//     policy may rebind the gradient (on_unsynced_grad). The next synchronized
//     backward sends the accumulated sums.
//   - after_backward() finishes a backward in which no hook fired on this rank
//     (the loss did not depend on any parameter here), so this rank still
//     joins the others' collectives.
//
// Every policy function runs with mutex_ held (the hooks run on autograd's
// threads). A derived class calls start_hooks() last in its constructor and
// stop_hooks() first in its destructor, so no hook runs on a half-built or
// half-destroyed object.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "mpiaccel/comm.hpp"
#include "grad_sync/grad_ready_hooks.hpp"

namespace mpiaccel::detail {

enum class MissingGradients { Forbid, Allow };

struct GradSyncOptions {
  /// Names the strategy in messages: "DDP", "ZeRO", "FSDP".
  std::string owner;
  MissingGradients missing = MissingGradients::Forbid;
  /// Allow only: all-reduce the used map in the first synchronized backward
  /// and reuse it after (the graph is static).
  bool reuse_used_map = false;
  /// Forbid only: what the error tells the user to do.
  std::string missing_advice;
};

/// Waits for `work` in a destructor: a failure is logged, never thrown.
void wait_at_shutdown(const WorkHandle& work, const std::string& owner) noexcept;
/// A collective's span on the trace's communication lane ([logging] trace),
/// if tracing, once the work is known done (a device one may still run).
void trace_work(const std::string& name, const WorkHandle& work);

class GradSync {
 public:
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;

  void set_gradient_sync(bool enabled);
  bool gradient_sync() const;
  /// Call after every loss.backward(). Collective.
  void after_backward();

  /// The tensors whose gradients are synchronized, in index order.
  const std::vector<at::Tensor>& grad_params() const { return params_; }
  /// Their names, in the same order.
  const std::vector<std::string>& grad_names() const { return names_; }
  // Read these between backwards (they take no lock).
  /// Parameter indices per bucket, in launch order.
  const std::vector<std::vector<size_t>>& bucket_assignment() const { return buckets_; }
  /// The order in which gradients became ready in this rank's first backward.
  const std::vector<size_t>& observed_order() const { return observed_order_; }
  /// Synchronized backwards completed.
  int64_t iterations() const;

 protected:
  /// `params`: distinct leaf tensors that require grad, with their names for
  /// messages. `status_comm` carries the status vector; every rank of it
  /// constructs the engine with the same parameter list.
  GradSync(std::vector<at::Tensor> params, std::vector<std::string> names,
           std::shared_ptr<Communicator> status_comm, GradSyncOptions options);
  virtual ~GradSync();

  void start_hooks();
  /// Removes the hooks. Never throws.
  void stop_hooks();
  /// Sets the buckets (launch order), each a list of parameter indices; every
  /// parameter in exactly one. Not during a backward.
  void set_buckets(std::vector<std::vector<size_t>> buckets);
  /// Queues the end-of-backward callback, once per backward. Also for a
  /// strategy's own backward hooks (FSDP's pre-backward gather). mutex_ held.
  void begin_backward();
  /// A hook fired and backward has not ended yet. mutex_ held.
  bool in_backward() const { return in_backward_; }

  /// (bucket, slot inside the bucket) of parameter `param`.
  std::pair<size_t, size_t> place_of(size_t param) const { return place_[param]; }
  const std::vector<size_t>& bucket_params(size_t bucket) const { return buckets_[bucket]; }

  // ---- the policy; called with mutex_ held
  /// Synchronized backward: `param`'s gradient (possibly undefined: the
  /// parameter got none) joins its bucket.
  virtual void stage(size_t param) = 0;
  /// Every gradient of `bucket` is staged: start its collective.
  virtual void launch(size_t bucket) = 0;
  /// Backward ended and every bucket launched: wait for them in order.
  virtual void finish_buckets() = 0;
  /// Write the results; global_used[i] == 0: no rank had a gradient for i.
  virtual void apply(const std::vector<int32_t>& global_used) = 0;
  /// Unsynchronized backward (no_sync): `param`'s gradient was accumulated.
  virtual void on_unsynced_grad(size_t param) {}
  /// Every hook of `bucket` fired in this backward (synchronized or not).
  virtual void on_bucket_filled(size_t bucket) {}
  /// First thing when a backward ends, synchronized or not.
  virtual void backward_ending() {}
  /// Last thing when a backward ended; `synchronized`: its results applied.
  virtual void backward_ended(bool synchronized) {}

  mutable std::mutex mutex_;

 private:
  void on_grad_ready(size_t param);
  void stage_and_count(size_t param);
  void launch_in_order();
  void finalize_locked();
  void finalize_synchronized();
  /// Starts the all-reduce of the status vector; nothing to send: null.
  WorkHandle start_status(at::Tensor& status, size_t missing);
  /// The global used map once the status arrived (Forbid: all ones).
  std::vector<int32_t> agree(WorkHandle status_work, at::Tensor& status, size_t missing);
  std::string missing_message() const;
  void reset_step(bool end_of_window);

  std::vector<at::Tensor> params_;
  std::vector<std::string> names_;
  std::shared_ptr<Communicator> status_comm_;
  GradSyncOptions options_;
  std::unique_ptr<GradReadyHooks> hooks_;

  std::vector<std::vector<size_t>> buckets_;
  std::vector<std::pair<size_t, size_t>> place_;  // param -> (bucket, slot)
  std::vector<size_t> pending_;                    // per bucket: hooks not fired / not staged
  size_t next_bucket_ = 0;

  bool sync_ = true;
  bool in_backward_ = false;  // a hook fired and the callback is queued
  bool finalized_ = false;    // the last backward was finalized (see after_backward)
  std::vector<char> fired_;   // hook fired in this backward
  std::vector<char> staged_;  // staged in this synchronized backward
  std::vector<int32_t> used_; // hook fired in this no_sync window (OR)
  std::vector<int32_t> cached_used_;
  bool have_cached_used_ = false;
  std::vector<size_t> observed_order_;
  bool recording_order_ = true;
  int64_t iterations_ = 0;
};

}  // namespace mpiaccel::detail
