#pragma once
// The FSDP runtime (internal): the unit interceptor that gathers a unit's
// parameters around its forward, the backward hooks that gather again and
// reduce-scatter gradients, and the engine callback that finishes a backward.
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
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "state/grad_ready_hooks.hpp"
#include "fsdp/fsdp_unit.hpp"
#include "mpiaccel/comm.hpp"
#include "mpiaccel/unit.hpp"

namespace torch::autograd {
struct Node;
}

namespace mpiaccel::detail {

enum class BackwardPrefetch { Pre, Post, None };

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
};

struct FsdpComms {
  std::shared_ptr<Communicator> world;    ///< every rank of the strategy
  std::shared_ptr<Communicator> gather;   ///< the shard group, all-gathers only
  std::shared_ptr<Communicator> reduce;   ///< the shard group, reduce-scatters only
  std::shared_ptr<Communicator> replica;  ///< across shard groups (hybrid), else null
};

class FsdpEngine final : public UnitInterceptor {
 public:
  /// Takes the units and parameters (built by the strategy) and installs the
  /// gradient-accumulator hooks.
  FsdpEngine(std::vector<FsdpUnit> units, std::vector<FsdpParam> params, FsdpComms comms,
             FsdpOptions options);
  /// Removes the hooks and waits for collectives in flight. Never throws.
  ~FsdpEngine() override;
  FsdpEngine(const FsdpEngine&) = delete;
  FsdpEngine& operator=(const FsdpEngine&) = delete;

  /// The interceptor: gathers `unit`'s parameters, runs it, reshards.
  at::Tensor run(torch::nn::Module& unit, const at::Tensor& input,
                 const UnitForward& forward) override;

  void set_gradient_sync(bool enabled);
  bool gradient_sync() const;
  /// After loss.backward(): finishes a backward in which no hook fired here.
  void after_backward();
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
  /// Synchronized backwards finished.
  int64_t iterations() const;

 private:
  /// `exact`: gather in the parameters' own dtype even under mixed precision.
  void launch_gather(FsdpUnit& unit, bool exact = false);
  at::Tensor finish_gather_buffer(FsdpUnit& unit);
  void finish_gather(FsdpUnit& unit);
  void gather_now(FsdpUnit& unit);
  void prefetch(size_t index);
  void reshard(FsdpUnit& unit);
  void drain_gathers();

  void begin_backward();
  void pre_backward(size_t unit, int64_t invocation);
  void on_grad_ready(size_t param);
  void unit_grads_done(FsdpUnit& unit);
  void launch_ready_reductions();
  void launch_reduce(FsdpUnit& unit);
  void finalize_backward();
  void finalize_locked();

  std::vector<FsdpUnit> units_;
  std::vector<FsdpParam> params_;
  FsdpComms comms_;
  FsdpOptions options_;
  std::unordered_map<const torch::nn::Module*, size_t> unit_of_module_;
  std::vector<size_t> reduce_order_;
  std::unique_ptr<GradReadyHooks> hooks_;

  mutable std::mutex mutex_;
  bool sync_ = true;
  bool in_backward_ = false;
  bool finalized_ = false;
  std::vector<char> fired_;    ///< hook fired in this backward
  std::vector<int32_t> used_;  ///< had a gradient when reduced, this backward
  size_t next_reduce_ = 0;
  std::vector<size_t> forward_order_;     ///< units in run order, this forward (with grad)
  std::vector<int64_t> next_in_forward_;  ///< per unit: the one after it last iteration, or -1
  int64_t iterations_ = 0;
  /// Tensor hooks outlive the engine in a graph nobody ran backward on.
  std::shared_ptr<FsdpEngine*> alive_;
  /// 16-bit reduce-scatter: 1/pre before the sum, 1/post after (undefined: none).
  at::Tensor pre_scale_;
  at::Tensor post_scale_;
};

}  // namespace mpiaccel::detail
