#pragma once
// The DDP gradient reducer, after PyTorch's c10d reducer.cpp (DDP paper,
// VLDB'20), in our own code over mpiaccel::Communicator.
//
// - Gradients live in buckets: one flat tensor per bucket, a view per
//   parameter. The layout comes from assign_buckets() over the reverse
//   parameter order, and is rebuilt once, at the end of the first synchronized
//   backward, in the order the gradients actually became ready on rank 0
//   (broadcast, so every rank has the same buckets).
// - A post hook on each parameter's gradient accumulator copies the fresh
//   gradient into its bucket view (with gradient_as_bucket_view, the default,
//   param.grad IS the view and nothing is copied). A full-width bucket is
//   all-reduced with Avg: the division happens inside the reduction, which
//   costs no pass over memory of its own.
// - reduce_dtype (mixed precision): a bucket whose dtype differs is cast into
//   its wire tensor (reduce_dtype, allocated with the bucket) when it
//   launches, all-reduced in that dtype
//   (half the bytes of fp32 for bf16/fp16) and cast back into the bucket when
//   backward ends. The division is then split as FSDP does: by `pre` in the
//   hook (the copy into the bucket, or in place in the view) and by `post`
//   after the sum (pre·post = world,
//   gradient_divide_factors), so 16-bit summands neither underflow nor
//   overflow. The optimizer still reads fp32 gradients.
// - When a bucket's last gradient is in, its all_reduce is launched on the
//   communicator's thread while backward goes on. Buckets launch strictly in
//   index order, so every rank issues the same sequence of collectives.
// - An engine callback (queued by the first hook of each backward) runs when
//   backward ends: it marks parameters whose hook did not fire as ready (their
//   accumulated .grad, or zeros), so every bucket launches, all-reduces a small
//   status vector (missing-gradient flag / used map), waits for every bucket and
//   writes the averaged gradients back into param.grad.
// - find_unused_parameters: "used" = the parameter's hook fired in this
//   backward or earlier in the no_sync window (OR). We do not walk the graph
//   from the outputs as PyTorch does (we see no forward), so buckets holding a
//   locally unused parameter launch only when backward ends; the result is the
//   same, the overlap smaller. Gradients of parameters no rank used are left
//   untouched. static_graph with find_unused_parameters: the global used map
//   of the first synchronized backward is reused and not all-reduced again.
// - Without find_unused_parameters, a parameter whose hook did not fire is an
//   error raised on every rank (agreed through the status all-reduce), naming
//   the parameter, instead of a hang.
// - set_gradient_sync(false) (no_sync): hooks communicate nothing; gradients
//   accumulate in param.grad (or in the bucket views); the next synchronized
//   backward reduces the accumulated sums.

#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "state/grad_ready_hooks.hpp"
#include "ddp/bucket_layout.hpp"
#include "mpiaccel/comm.hpp"

namespace torch::autograd {
struct Node;
}

namespace mpiaccel::detail {

struct ReducerOptions {
  int64_t first_bucket_bytes = int64_t{1} << 20;
  int64_t bucket_bytes = int64_t{25} << 20;
  bool find_unused_parameters = false;
  bool gradient_as_bucket_view = true;
  bool static_graph = false;
  /// The dtype of the all-reduce; nullopt = each bucket's own dtype.
  std::optional<at::ScalarType> reduce_dtype;
};

class Reducer {
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
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  void set_gradient_sync(bool enabled);
  bool gradient_sync() const;

  /// Call after every loss.backward(). Finishes a backward in which no hook
  /// fired on this rank (the loss did not depend on any parameter here), so
  /// this rank still joins the other ranks' all-reduces. Collective.
  void after_backward();

  /// Zeroes every gradient of the reducer's parameters in place (bucket
  /// views stay bound to param.grad).
  void zero_grad();
  /// True if `param` is one of the reducer's parameters.
  bool manages(const at::Tensor& param) const;

  // --- introspection (tests, benchmarks, memory accounting)
  /// Parameter indices per bucket, in launch order.
  std::vector<std::vector<size_t>> bucket_assignment() const;
  /// Bytes of each bucket's flat tensor.
  std::vector<int64_t> bucket_sizes() const;
  /// Bytes each synchronized backward all-reduces (in reduce_dtype), the
  /// status vector not included.
  int64_t reduced_bytes_per_step() const;
  /// Bytes of the reduce_dtype copies of the buckets (0 without a cast).
  int64_t wire_bytes() const;
  bool buckets_rebuilt() const;
  /// Timings of the buckets of the last synchronized backward.
  std::vector<BucketTiming> last_bucket_timings() const;
  /// When the last backward's engine callback started (= backward ended).
  Clock::time_point last_backward_end() const;
  /// The bucket view of parameter `index`.
  at::Tensor bucket_view(size_t index) const;
  /// The order in which gradients became ready in this rank's first backward.
  std::vector<size_t> observed_order() const { return observed_order_; }
  /// Synchronized backwards completed.
  int64_t iterations() const;
  const std::vector<at::Tensor>& params() const { return params_; }

 private:
  struct Bucket {
    at::Tensor flat;
    at::Tensor wire;  // flat's copy in reduce_dtype for the all-reduce; undefined without a cast
    std::vector<size_t> params;
    std::vector<at::Tensor> views;
    size_t pending = 0;
    WorkHandle work;
    BucketTiming timing;
  };

  void on_grad_ready(size_t index);
  void finalize_backward();
  void finalize_locked(std::unique_lock<std::mutex>& lock);
  void mark_ready(size_t index);
  void launch_ready_buckets();
  void bind_to_view(size_t index);
  void build_buckets(const std::vector<std::vector<size_t>>& assignment);
  void rebuild_buckets();
  void reset_step(bool end_of_window);
  std::string missing_message() const;

  std::vector<at::Tensor> params_;
  std::unordered_set<const void*> param_impls_;  // for manages()
  std::vector<std::string> names_;
  std::shared_ptr<Communicator> comm_;
  ReducerOptions options_;
  std::vector<GradInfo> infos_;
  std::unique_ptr<GradReadyHooks> hooks_;
  ReduceOp bucket_op_ = ReduceOp::Avg;  // Sum when a 16-bit wire splits the division
  at::Tensor pre_scale_;   // 0-d double, split division only: applied in the copy into the bucket
  at::Tensor post_scale_;  // 0-d double, split division only: applied after the sum; undefined = none

  mutable std::mutex mutex_;
  std::vector<Bucket> buckets_;
  std::vector<std::pair<size_t, size_t>> locator_;  // param -> (bucket, slot)
  size_t next_bucket_ = 0;

  bool sync_ = true;
  bool in_backward_ = false;  // a hook fired and the callback is queued
  bool finalized_ = false;    // the last backward was finalized (see after_backward)
  std::vector<char> fired_;   // hook fired in this backward
  std::vector<char> ready_;   // marked ready in this synchronized backward
  std::vector<int32_t> used_; // hook fired in this no_sync window (OR)
  std::vector<int32_t> global_used_;  // static_graph cache
  bool have_global_used_ = false;

  std::vector<size_t> observed_order_;  // ready order of the first backward
  bool recording_order_ = true;
  bool rebuilt_ = false;
  int64_t iterations_ = 0;
  Clock::time_point backward_end_{};
  std::vector<BucketTiming> last_timings_;
};

}  // namespace mpiaccel::detail
