#pragma once
// DDP communication hooks, after PyTorch's DistributedDataParallel
// register_comm_hook: a hook decides how one bucket of gradients is reduced
// over the data-parallel ranks (docs/ddp.md, "Communication hooks").
//
// The reducer hands a hook each bucket when the bucket's last gradient is in,
// in bucket order, identically on every rank. launch() starts the
// communication and returns a HookWork; when backward ends the reducer waits
// for each bucket's work in the same order and calls its finish(), which must
// leave in bucket.buffer what the optimizer is to apply: the average over the
// ranks, or the hook's approximation of it. Both run on autograd's threads;
// every collective a hook issues must be issued in the same order on every
// rank.
//
// Built in ([ddp] comm_hook): all-reduce in the bucket's dtype (the default),
// fp16 / bf16 compression, PowerSGD and batched PowerSGD (make_comm_hook).

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mpiaccel/comm.hpp"
#include "mpiaccel/state.hpp"

namespace mpiaccel {

struct DdpConfig;

/// One bucket of gradients, as a hook sees it.
struct GradBucket {
  /// Position in launch order (0 launches first).
  size_t index = 0;
  /// The last bucket of this backward.
  bool last = false;
  /// Flat, contiguous: this rank's gradients of the bucket's parameters,
  /// summed over the micro-steps and not yet divided by anything. The hook
  /// leaves the reduced gradients here.
  at::Tensor buffer;
  /// Allocated by the reducer when the hook's wire_dtype_for() asks for it:
  /// buffer's size in that dtype, in node-shared memory where the ranks
  /// share a node (its all-reduce then runs through it). Undefined otherwise.
  at::Tensor wire;
  /// Views of buffer, one per parameter, shaped like it.
  std::vector<at::Tensor> gradients;
  /// Each gradient's parameter: its index in the list attach() received.
  std::vector<size_t> params;
  /// The data-parallel ranks.
  Communicator* comm = nullptr;
};

/// What launch() returns.
struct HookWork {
  /// The collective launched now, for timings and traces; may be null.
  WorkHandle work;
  /// Run when backward ends, after `work` (if any) is waited for: completes
  /// the reduction into bucket.buffer. May issue further collectives. Empty
  /// when `work` alone leaves the result in the buffer.
  std::function<void()> finish;
};

class CommHook {
 public:
  virtual ~CommHook() = default;
  /// For logs, traces and checkpoint names: "all_reduce", "bf16", "powersgd", ...
  virtual std::string name() const = 0;
  /// Once, before the first bucket: every parameter the reducer reduces, and
  /// their names (fully qualified). Same list on every rank.
  virtual void attach(const std::vector<at::Tensor>& params, const std::vector<std::string>& names,
                      Communicator& comm) {
    (void)params;
    (void)names;
    (void)comm;
  }
  /// The dtype GradBucket::wire should have for a bucket of `bucket_dtype`;
  /// nullopt: no wire tensor.
  virtual std::optional<at::ScalarType> wire_dtype_for(at::ScalarType bucket_dtype) const {
    (void)bucket_dtype;
    return std::nullopt;
  }
  /// Starts reducing `bucket`. The bucket (and its tensors) stays valid
  /// until its finish() has returned.
  virtual HookWork launch(GradBucket& bucket) = 0;

  // --- checkpoints: state a resume needs to be exact (PowerSGD's error
  // feedback and warm start). Names start with "comm_hook/<name>/".
  /// This rank's part of the state, for saving.
  virtual void add_state(ShardedStateDict& dict) { (void)dict; }
  /// The same names as destinations, for loading; mark those a checkpoint
  /// may lack (another world size, no hook) `optional`.
  virtual void add_load_targets(ShardedStateDict& dict) { (void)dict; }
  /// After the checkpoint filled the targets.
  virtual void finish_load() {}

  /// Bytes of state the hook holds (memory accounting).
  virtual int64_t state_bytes() const { return 0; }
};

/// PowerSGD's settings (Vogels et al. 2019; PyTorch's PowerSGDState).
struct PowerSgdOptions {
  /// Rank r of the approximation M ≈ P Qᵀ.
  int64_t rank = 1;
  /// Plain all-reduce for the first start_iter synchronized steps.
  int64_t start_iter = 1000;
  /// A matrix is compressed only if (rows + cols)·rank·rate < rows·cols.
  double min_compression_rate = 2;
  /// Feed each step's local compression error into the next step.
  bool error_feedback = true;
  /// Start each step's power iteration from the last step's Q.
  bool warm_start = true;
  /// Added to each column's norm before dividing (0: none).
  double orthogonalization_epsilon = 0;
  /// Seed of the initial Q (the same on every rank).
  uint64_t seed = 0;
  /// Batched: one square matrix per bucket, instead of one matrix per
  /// gradient.
  bool batched = false;
  /// The dtype of P's, Q's and the uncompressed gradients' all-reduces
  /// ([ddp] comm_wrapper); nullopt: the gradients' own.
  std::optional<at::ScalarType> allreduce_dtype;
};

/// All-reduce each bucket. With `wire_dtype` (fp16, bf16) the bucket is sent
/// in that dtype and the division by the world size is split into a factor
/// before the sum and one after it, so 16-bit sums neither overflow nor
/// underflow; without, the all-reduce averages.
std::shared_ptr<CommHook> make_all_reduce_hook(std::optional<at::ScalarType> wire_dtype = std::nullopt);
std::shared_ptr<CommHook> make_powersgd_hook(const PowerSgdOptions& options);
/// The hook [ddp] comm_hook names, with [ddp]'s PowerSGD options, and the
/// precision policy's reduce_dtype (nullopt: the gradients' own) as the
/// dtype on the wire.
std::shared_ptr<CommHook> make_comm_hook(const DdpConfig& config,
                                         std::optional<at::ScalarType> reduce_dtype);

}  // namespace mpiaccel
