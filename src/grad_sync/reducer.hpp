#pragma once
// The DDP gradient reducer, after PyTorch's c10d reducer.cpp (DDP paper,
// VLDB'20), in our own code over mpiaccel::Communicator.
//
// The backward state machine (hooks, in-order launches, the end-of-backward
// callback, missing-gradient agreement, no_sync) is GradSync's
// (grad_sync/grad_sync.hpp); this class is its all-reduce policy. DDP uses it, and
// ZeRO-1 for its gradients.
//
// - Gradients live in buckets: one flat tensor per bucket, a view per
//   parameter. The layout comes from assign_buckets() over the reverse
//   parameter order, and is rebuilt once, at the end of the first synchronized
//   backward, in the order the gradients actually became ready on rank 0
//   (broadcast, so every rank has the same buckets).
// - Staging a gradient copies it into its bucket view (with
//   gradient_as_bucket_view, the default, param.grad IS the view and nothing
//   is copied). A full bucket goes to the communication hook
//   (mpiaccel/comm_hook.hpp): by default an all-reduce with Avg, the division
//   inside the reduction, no pass over memory of its own. The hook's
//   wire_dtype_for() decides whether a bucket also gets a wire tensor (fp16 /
//   bf16 compression), allocated once with the bucket, in node-shared memory
//   where the ranks share a node.
// - When backward ends the averaged buckets are written back into param.grad.
// - find_unused_parameters (MissingGradients::Allow): "used" = the
//   parameter's hook fired in this backward or earlier in the no_sync window.
//   We do not walk the graph from the outputs as PyTorch does (we see no
//   forward), so buckets holding a locally unused parameter launch only when
//   backward ends; the result is the same, the overlap smaller. Gradients of
//   parameters no rank used are left untouched. static_graph: the used map of
//   the first synchronized backward is reused, not all-reduced again.
// - Without find_unused_parameters a parameter whose hook did not fire is an
//   error raised on every rank, naming the parameter, instead of a hang.
// - set_gradient_sync(false) (no_sync): gradients accumulate in param.grad
//   (or in the bucket views); the next synchronized backward reduces the sums.

#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "mpiaccel/comm.hpp"
#include "mpiaccel/comm_hook.hpp"
#include "grad_sync/bucket_layout.hpp"
#include "grad_sync/grad_sync.hpp"

namespace mpiaccel::detail {

/// The first bucket of DDP and ZeRO (1 MiB, as PyTorch's DDP): small, so
/// its reduction starts early in backward.
constexpr int64_t kFirstBucketBytes = int64_t{1} << 20;

struct ReducerOptions {
  int64_t first_bucket_bytes = kFirstBucketBytes;
  /// The other buckets: [ddp] bucket_cap_mb or [zero] reduce_bucket_mb (the
  /// config holds the default); the Reducer refuses 0.
  int64_t bucket_bytes = 0;
  bool find_unused_parameters = false;
  bool gradient_as_bucket_view = true;
  bool static_graph = false;
  /// How a bucket is reduced; null: all-reduce in the bucket's dtype.
  std::shared_ptr<CommHook> hook;
};

class Reducer final : public GradSync {
 public:
  using Clock = std::chrono::steady_clock;

  /// When one bucket's all_reduce was launched (queued), started executing on
  /// the communication thread, and finished.
  struct BucketTiming {
    Clock::time_point launched;
    Clock::time_point started;
    Clock::time_point finished;
  };

  /// `params`: distinct leaf tensors that require grad, with their names for
  /// messages. Installs the hooks. Collective over comm only in that every rank
  /// must construct it with the same parameter list.
  Reducer(std::vector<at::Tensor> params, std::vector<std::string> names,
          std::shared_ptr<Communicator> comm, ReducerOptions options);
  /// Removes the hooks and waits for in-flight all-reduces. Never throws.
  ~Reducer() override;

  /// What this LibTorch's Optimizer::zero_grad() does to every gradient of
  /// the reducer's parameters: on 2.x they become undefined, and the next
  /// backward copies each new gradient into its bucket view and binds
  /// param.grad to the view again (a parameter no rank uses before the end of
  /// a synchronized backward keeps an undefined .grad, as in one process, so
  /// the optimizer skips it); on 1.13 they are zeroed in place.
  void zero_grad();
  /// True if `param` is one of the reducer's parameters.
  bool manages(const at::Tensor& param) const;

  // --- introspection (tests, benchmarks, memory accounting)
  /// Bytes of each bucket's flat tensor.
  std::vector<int64_t> bucket_sizes() const;
  /// Bytes the buckets' all-reduce sends per synchronized backward (their
  /// wire tensors where they have them), the status vector not included:
  /// what a hook that all-reduces each bucket sends.
  int64_t reduced_bytes_per_step() const;
  /// Bytes of the buckets' wire tensors (0 without a cast).
  int64_t wire_bytes() const;
  /// The hook the buckets go through.
  CommHook& hook() { return *hook_; }
  bool buckets_rebuilt() const;
  /// Timings of the buckets of the last synchronized backward. On a GPU the
  /// all-reduces may still run after backward returns: a bucket's started
  /// and finished times are set once it is done (synchronise the device
  /// before asking).
  std::vector<BucketTiming> last_bucket_timings() const;
  /// When the last backward's engine callback started (= backward ended).
  Clock::time_point last_backward_end() const;
  /// The bucket view of parameter `index`.
  at::Tensor bucket_view(size_t index) const;

 private:
  struct Bucket {
    GradBucket grads;  // buffer: the flat gradients; wire: the hook's wire tensor, if any
    HookWork work;     // from the hook's launch(), until finish_buckets
    Clock::time_point launched;
  };

  // The policy (grad_sync/grad_sync.hpp).
  void stage(size_t index) override;
  void launch(size_t bucket) override;
  void finish_buckets() override;
  void apply(const std::vector<int32_t>& global_used) override;
  void on_unsynced_grad(size_t index) override;
  void backward_ending() override;
  void backward_ended(bool synchronized) override;

  const at::Tensor& view_of(size_t index) const;
  void bind_to_view(size_t index);
  void build_buckets(const std::vector<std::vector<size_t>>& assignment);
  void rebuild_buckets();

  std::unordered_set<const void*> param_impls_;  // for manages()
  std::shared_ptr<Communicator> comm_;
  ReducerOptions options_;
  std::vector<GradInfo> infos_;
  std::shared_ptr<CommHook> hook_;

  std::vector<Bucket> buckets_;
  std::vector<char> untouched_;  // no gradient since zero_grad(), per parameter
  bool rebuilt_ = false;
  Clock::time_point backward_end_{};
  /// The last synchronized backward's all-reduces and their launch times.
  std::vector<std::pair<Clock::time_point, WorkHandle>> last_works_;
};

}  // namespace mpiaccel::detail
