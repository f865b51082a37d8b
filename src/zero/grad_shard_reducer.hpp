#pragma once
// ZeRO-2's gradient path: as the DDP reducer (src/ddp/reducer.hpp), but each
// bucket is reduce-scattered instead of all-reduced, so every rank ends up
// with only its rows of every averaged gradient.
//
// - Buckets: assign_buckets (DDP's layout rules: reverse parameter order,
//   grouped by dtype and device, first bucket 1 MiB then reduce_bucket_mb).
//   Not rebuilt from the observed order (a DDP refinement we skip here: the
//   reverse order is already close to backward's).
// - A post hook on each gradient accumulator copies the fresh gradient, divided
//   by the world size, into the bucket's rank-major padded input
//   (shard_layout.hpp), then frees the full gradient (param.grad becomes
//   undefined). The input buffer exists only while its bucket is in flight.
// - When a bucket is complete it is reduce-scattered on the communicator's
//   thread, strictly in bucket order; the output is this rank's persistent
//   shard-gradient buffer, and shard_grad(i) views into it.
// - An engine callback finishes the backward: parameters whose hook did not
//   fire contribute their accumulated .grad or zeros, a one-int status
//   all-reduce detects a parameter missing on any rank (then every rank throws
//   the same error, as DDP without find_unused_parameters), and every bucket is
//   waited for.
// - Like torch's .grad, shard gradients accumulate until zero_grad(): after a
//   zero_grad the reduce-scatter writes them directly, otherwise into a
//   temporary that is added.
// - set_gradient_sync(false) (no_sync / accumulation): nothing is
//   communicated; full gradients accumulate in param.grad as in DDP (so during
//   such a window a rank holds full gradients), and the next synchronized
//   backward reduce-scatters the sums and frees them.
// - reduce_dtype (mixed precision): the padded input is built in that dtype
//   (the copy into it casts), reduce-scattered in it, and the result is cast
//   back into the fp32 shard gradients; 16-bit reductions divide by `pre`
//   before and `post` after the sum (gradient_divide_factors), as DDP does.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "state/grad_ready_hooks.hpp"
#include "ddp/bucket_layout.hpp"
#include "mpiaccel/comm.hpp"
#include "state/shard_layout.hpp"

namespace torch::autograd {
struct Node;
}

namespace mpiaccel::detail {

class GradShardReducer {
 public:
  /// `params`: distinct contiguous leaf tensors that require grad, with names
  /// (for messages) and their shards over comm. Installs the hooks. Every rank
  /// constructs it with the same parameter list.
  GradShardReducer(std::vector<at::Tensor> params, std::vector<std::string> names,
                   std::vector<ParamShard> shards, std::shared_ptr<Communicator> comm,
                   int64_t first_bucket_bytes, int64_t bucket_bytes,
                   std::optional<at::ScalarType> reduce_dtype = std::nullopt);
  /// Removes the hooks and waits for in-flight reduce-scatters. Never throws.
  ~GradShardReducer();
  GradShardReducer(const GradShardReducer&) = delete;
  GradShardReducer& operator=(const GradShardReducer&) = delete;

  void set_gradient_sync(bool enabled);
  bool gradient_sync() const;
  /// Call after every loss.backward(): finishes a backward in which no hook
  /// fired on this rank, so it still joins the collectives. Collective.
  void after_backward();
  /// Zeroes the shard gradients (and full gradients of a no_sync window).
  void zero_grad();

  /// This rank's rows of parameter i's averaged gradient, shaped like
  /// shard_view(param, ...): a view into the shard-gradient buffer.
  const at::Tensor& shard_grad(size_t i) const { return shard_grads_[i]; }
  /// Bytes of the shard-gradient buffers (padded slots).
  int64_t shard_grad_bytes() const;
  /// Bytes of full gradients held now (only inside a no_sync window).
  int64_t full_grad_bytes() const;
  std::vector<std::vector<size_t>> bucket_assignment() const;
  /// Synchronized backwards completed.
  int64_t iterations() const;
  /// Bytes each synchronized backward feeds into reduce-scatters (the padded
  /// inputs, in the reduce dtype).
  int64_t reduced_bytes_per_step() const;

 private:
  struct Bucket {
    std::vector<size_t> params;
    std::vector<int64_t> offsets;  // of each parameter's slot inside a block
    int64_t block = 0;             // elements per rank block
    at::Tensor output;             // this rank's block: the shard gradients
    at::Tensor input;              // N blocks in the reduce dtype, only while in flight
    at::Tensor scratch;            // reduce-scatter target when accumulating or casting
    size_t pending = 0;
    WorkHandle work;
  };

  void on_grad_ready(size_t index);
  void finalize_locked();
  void mark_ready(size_t index);
  void launch_ready_buckets();
  void reset_step();
  std::string missing_message() const;

  std::vector<at::Tensor> params_;
  std::vector<std::string> names_;
  std::vector<ParamShard> shards_;
  std::shared_ptr<Communicator> comm_;
  std::unique_ptr<GradReadyHooks> hooks_;
  std::optional<at::ScalarType> reduce_dtype_;
  at::Tensor pre_scale_;   // 0-d double: applied in the copy into the input
  at::Tensor post_scale_;  // 0-d double: applied after the sum; undefined = none

  mutable std::mutex mutex_;
  std::vector<Bucket> buckets_;
  std::vector<std::pair<size_t, size_t>> locator_;  // param -> (bucket, slot)
  std::vector<at::Tensor> shard_grads_;
  size_t next_bucket_ = 0;
  bool sync_ = true;
  bool in_backward_ = false;
  bool finalized_ = false;
  bool accumulate_ = false;  // shard grads hold values not yet zeroed
  std::vector<char> fired_;
  std::vector<char> ready_;
  int64_t iterations_ = 0;
};

}  // namespace mpiaccel::detail
