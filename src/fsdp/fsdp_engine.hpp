#pragma once
// The FSDP runtime (internal): the unit interceptor that gathers a unit's
// parameters around its forward, the backward hooks that gather again, and
// the reduce-scatter of gradients, one unit per bucket, as GradSync's policy
// (grad_sync/grad_sync.hpp holds the backward state machine: gradient hooks,
// in-order launches, the end-of-backward callback, the used map, no_sync).
// docs/fsdp.md tells the whole sequence; the why of each step is commented at
// the spot.
//
// Collective order. Three communicators keep the three kinds of collectives
// apart, so that each kind needs only its own order to agree across ranks:
//   gather  — all-gathers, in the order units run (forward) and their
//             backward begins; prefetches follow the previous iteration's
//             order, the same on every rank whose control flow is the same;
//   reduce  — reduce-scatters, strictly in the fixed unit order (last unit
//             first, root last), one per unit per synchronized backward,
//             whatever ran;
//   world   — the used map, norms and state (blocking, at fixed points);
//   replica — (hybrid) the all-reduce of the sharded gradients across groups.
// Each gathered block carries the unit's index: a rank whose control flow
// diverged (it skipped or added a unit) makes every rank of the gather see
// different indices and throw the same error, instead of mixing up units.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "fsdp/fsdp_unit.hpp"
#include "mpiaccel/comm.hpp"
#include "mpiaccel/config_choices.hpp"  // BackwardPrefetch
#include "mpiaccel/unit.hpp"
#include "grad_sync/grad_sync.hpp"
#include "grad_sync/offload_copies.hpp"
#include "runtime/device_streams.hpp"

namespace mpiaccel::detail {

struct FsdpOptions {
  bool reshard_after_forward = true;
  bool forward_prefetch = true;
  BackwardPrefetch backward_prefetch = BackwardPrefetch::Pre;
  /// Mixed precision (docs/precision.md): the dtype of the all-gather of
  /// parameters (param_dtype) and of the reduce-scatter of gradients
  /// (reduce_dtype); nullopt = the parameters' own dtype. Shards, full
  /// parameters and sharded gradients keep the parameters' dtype.
  std::optional<at::ScalarType> gather_dtype;
  std::optional<at::ScalarType> reduce_dtype;
  /// ZeRO++ qwZ: forward's and backward's all-gathers in int8 with block
  /// scales (fsdp/quantized_gather.hpp); gather_dtype then does not apply.
  bool quantized_weights = false;
  /// ZeRO++ qgZ: the gradient reduce-scatter as an all-to-all of int8 blocks
  /// with scales, summed in float32 on arrival; reduce_dtype then does not apply.
  bool quantized_gradients = false;
  // ZeRO++ hpZ is on when FsdpComms::secondary exists.
};

struct FsdpComms {
  std::shared_ptr<Communicator> world;    ///< every rank of the strategy
  std::shared_ptr<Communicator> gather;   ///< the shard group, all-gathers only
  std::shared_ptr<Communicator> reduce;   ///< the shard group, reduce-scatters only
  std::shared_ptr<Communicator> replica;  ///< across shard groups (hybrid), else null
  /// ZeRO++ hpZ: consecutive ranks of the shard group (a node's, or
  /// secondary_partition_size of them), backward's all-gathers only; else
  /// null. Forward's gathers keep this rank's part of each unit for it.
  std::shared_ptr<Communicator> secondary;
};

class FsdpEngine final : public UnitInterceptor, public GradSync {
 public:
  /// Takes the units and parameters (built by the strategy) and installs the
  /// gradient-accumulator hooks.
  FsdpEngine(std::vector<FsdpUnit> units, std::vector<FsdpParam> params, FsdpComms comms,
             FsdpOptions options);
  /// Removes the hooks and waits for collectives in flight. Never throws.
  ~FsdpEngine() override;

  /// The interceptor: gathers `unit`'s parameters, runs it, reshards.
  at::Tensor run(torch::nn::Module& unit, const at::Tensor& input,
                 const UnitForward& forward) override;

  /// Before the optimizer step: no gather in flight, managed units sharded.
  void before_step();
  /// After the shards changed (optimizer step, checkpoint load): gathers the
  /// units that live gathered again, reshards the others.
  void refresh_gathered();
  /// Drops full-size gradients kept by a no_sync window.
  void zero_full_grads();
  /// The full tensors of unit `index`, gathered into fresh memory (not into
  /// the parameters). Collective over the shard group.
  std::vector<at::Tensor> gather_copy(size_t index);

  const std::vector<FsdpUnit>& units() const { return units_; }
  const std::vector<FsdpParam>& params() const { return params_; }
  const FsdpComms& comms() const { return comms_; }
  const FsdpOptions& options() const { return options_; }

 private:
  /// `exact`: gather in the parameters' own dtype even under mixed precision.
  void launch_gather(FsdpUnit& unit, bool exact = false);
  void launch_quantized_gather(FsdpUnit& unit);
  void launch_secondary_gather(FsdpUnit& unit);
  /// hpZ: whether the gather finishing now is forward's, whose buffer backward reuses.
  bool keeps_secondary(const FsdpUnit& unit) const;
  at::Tensor finish_gather_buffer(FsdpUnit& unit);
  /// Throws on every rank of the group if the gathered unit tags (`tags`:
  /// parts x 2 digits, on the host) name another unit than `unit`.
  void check_tags(const FsdpUnit& unit, const at::Tensor& tags) const;
  /// Device buffers: the tags come down asynchronously and are checked once
  /// landed (below), so a gather never stalls the host.
  void check_landed_tags(bool wait);
  void finish_gather(FsdpUnit& unit);
  void gather_now(FsdpUnit& unit);
  void prefetch(size_t index);
  void reshard(FsdpUnit& unit);
  void drain_gathers();

  void pre_backward(size_t unit, int64_t invocation);
  FsdpUnit& unit_of_bucket(size_t bucket) { return units_[reduce_order_[bucket]]; }
  void launch_reduce(FsdpUnit& unit);
  void launch_quantized_reduce(FsdpUnit& unit, const at::Tensor& input);
  void finish_quantized_reduce(FsdpUnit& unit);
  void drop_secondaries();

  // The policy (grad_sync/grad_sync.hpp). Bucket k is unit reduce_order_[k].
  void stage(size_t param) override {}  // packed when the unit launches
  void launch(size_t bucket) override { launch_reduce(unit_of_bucket(bucket)); }
  void on_bucket_filled(size_t bucket) override;
  void backward_ending() override;
  void finish_buckets() override;
  void apply(const std::vector<int32_t>& global_used) override;
  void backward_ended(bool synchronized) override;

  std::vector<FsdpUnit> units_;
  std::vector<FsdpParam> params_;
  FsdpComms comms_;
  FsdpOptions options_;
  std::unordered_map<const torch::nn::Module*, size_t> unit_of_module_;
  /// The fixed reduce-scatter order: last unit first, the root last.
  std::vector<size_t> reduce_order_;

  std::vector<size_t> forward_order_;     ///< units in run order, this forward (with grad)
  std::vector<int64_t> next_in_forward_;  ///< per unit: the one after it last iteration, or -1
  /// Tensor hooks outlive the engine in a graph nobody ran backward on.
  std::shared_ptr<FsdpEngine*> alive_;
  /// 16-bit reduce-scatter: 1/pre before the sum, 1/post after (undefined: none).
  at::Tensor pre_scale_;
  at::Tensor post_scale_;
  /// Tags of device gathers still on their way to the host.
  struct PendingTags {
    size_t unit;
    at::Tensor host;
    StreamEvent landed;
  };
  std::vector<PendingTags> pending_tags_;
  /// cpu_offload on a GPU: the shards' gradients come down on a side stream
  /// into pinned buffers (one per parameter).
  OffloadCopies grad_copies_;
  std::vector<at::Tensor> grad_landing_;
};

}  // namespace mpiaccel::detail
