#pragma once
// ZeRO-2's gradient path: GradSync's reduce-scatter policy
// (grad_sync/grad_sync.hpp holds the backward state machine: hooks, in-order
// launches, the missing-gradient agreement, no_sync). Like the DDP reducer
// (grad_sync/reducer.hpp), but each bucket is reduce-scattered instead of
// all-reduced, so every rank ends up with only its rows of every averaged
// gradient.
//
// - Buckets: assign_buckets (DDP's layout rules: reverse parameter order,
//   grouped by dtype and device, first bucket 1 MiB then reduce_bucket_mb).
//   Not rebuilt from the observed order (a DDP refinement we skip here: the
//   reverse order is already close to backward's).
// - Staging a gradient copies it, divided by the world size, into the
//   bucket's rank-major padded input (shard_layout.hpp), then frees the full
//   gradient (param.grad becomes undefined). The input buffer exists only
//   while its bucket is in flight.
// - A complete bucket is reduce-scattered on the communicator's thread; the
//   output is this rank's persistent shard-gradient buffer, and shard_grad(i)
//   views into it.
// - A parameter missing on any rank is an error on every rank
//   (MissingGradients::Forbid), as DDP without find_unused_parameters.
// - Like torch's .grad, shard gradients accumulate until zero_grad(): after a
//   zero_grad the reduce-scatter writes them directly, otherwise into a
//   temporary that is added.
// - set_gradient_sync(false) (no_sync / accumulation): full gradients
//   accumulate in param.grad as in DDP (so during such a window a rank holds
//   full gradients), and the next synchronized backward reduce-scatters the
//   sums and frees them.
// - reduce_dtype (mixed precision): the padded input is built in that dtype
//   (the copy into it casts), reduce-scattered in it, and the result is cast
//   back into the fp32 shard gradients; 16-bit reductions divide by `pre`
//   before and `post` after the sum (gradient_divide_factors), as DDP does.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mpiaccel/comm.hpp"
#include "grad_sync/grad_sync.hpp"
#include "state/shard_layout.hpp"

namespace mpiaccel::detail {

class GradShardReducer final : public GradSync {
 public:
  /// `params`: distinct contiguous leaf tensors that require grad, with names
  /// (for messages) and their shards over comm. Installs the hooks. Every rank
  /// constructs it with the same parameter list.
  GradShardReducer(std::vector<at::Tensor> params, std::vector<std::string> names,
                   std::vector<ParamShard> shards, std::shared_ptr<Communicator> comm,
                   int64_t first_bucket_bytes, int64_t bucket_bytes,
                   std::optional<at::ScalarType> reduce_dtype = std::nullopt);
  /// Removes the hooks and waits for in-flight reduce-scatters. Never throws.
  ~GradShardReducer() override;

  /// Zeroes the shard gradients (and full gradients of a no_sync window).
  void zero_grad();

  /// This rank's rows of parameter i's averaged gradient, shaped like
  /// shard_view(param, ...): a view into the shard-gradient buffer.
  const at::Tensor& shard_grad(size_t i) const { return shard_grads_[i]; }
  /// Bytes of the shard-gradient buffers (padded slots).
  int64_t shard_grad_bytes() const;
  /// Bytes of full gradients held now (only inside a no_sync window).
  int64_t full_grad_bytes() const;
  /// Bytes each synchronized backward feeds into reduce-scatters (the padded
  /// inputs, in the reduce dtype).
  int64_t reduced_bytes_per_step() const;

 private:
  struct Bucket {
    std::vector<int64_t> offsets;  // of each parameter's slot inside a block
    int64_t block = 0;             // elements per rank block
    at::Tensor output;             // this rank's block: the shard gradients
    at::Tensor input;              // N blocks in the reduce dtype, only while in flight
    at::Tensor scratch;            // reduce-scatter target when accumulating or casting
    WorkHandle work;
  };

  // The policy (grad_sync/grad_sync.hpp).
  void stage(size_t index) override;
  void launch(size_t bucket) override;
  void finish_buckets() override;
  void apply(const std::vector<int32_t>& global_used) override;

  void build_buckets();

  std::vector<ParamShard> shards_;
  std::shared_ptr<Communicator> comm_;
  std::optional<at::ScalarType> reduce_dtype_;
  at::Tensor pre_scale_;   // 0-d double: applied in the copy into the input
  at::Tensor post_scale_;  // 0-d double: applied after the sum; undefined = none

  std::vector<Bucket> buckets_;
  std::vector<at::Tensor> shard_grads_;
  bool accumulate_ = false;  // shard grads hold values not yet zeroed
};

}  // namespace mpiaccel::detail
