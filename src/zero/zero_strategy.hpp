#pragma once
// ZeroStrategy: ZeRO stages 1 and 2 with optional optimizer offload
// (include/mpiaccel/zero.hpp, docs/zero.md). Internal header; tests reach the
// reducers and shards through it.
//
// prepare() makes the model identical on every rank (as DDP), computes each
// parameter's dim-0 shard (shard_layout.hpp) and re-points the optimizer's
// parameter groups at "shard parameters":
//   - no offload: plain aliases of this rank's rows of each parameter, so the
//     optimizer's in-place step writes the parameter itself;
//   - offload_optimizer = cpu: fp32 host copies of those rows (the master
//     weights; pinned when the parameter is on a GPU), with host gradient
//     buffers. The step runs on the host (host_adamw_step for AdamW, the
//     optimizer's own step otherwise), pipelined with the copies
//     (grad_sync/offload_copies.hpp): a gradient comes down on a side stream and
//     is stepped as soon as it lands, and each stepped master goes back up
//     into the parameter's own rows while the host steps the next one; the
//     all-gather then sends those rows.
// Gradients: stage 1 all-reduces them with the DDP Reducer (bucket views,
// reduce_bucket_mb), and the shard parameter's .grad is a view of its rows;
// stage 2 reduce-scatters them (GradShardReducer), and .grad is the rank's
// shard gradient.

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "grad_sync/reducer.hpp"
#include "mpiaccel/config.hpp"
#include "mpiaccel/precision.hpp"
#include "mpiaccel/strategy.hpp"
#include "zero/grad_shard_reducer.hpp"
#include "zero/param_gather.hpp"
#include "state/shard_layout.hpp"
#include "state/shard_optimizer_state.hpp"
#include "grad_sync/offload_copies.hpp"

namespace mpiaccel::detail {

class ZeroStrategy final : public Strategy {
 public:
  ZeroStrategy(const ZeroConfig& config, std::shared_ptr<Communicator> comm,
               const PrecisionPolicy& precision = {});

  std::string name() const override { return "zero" + std::to_string(config_.stage); }
  void prepare(std::shared_ptr<torch::nn::Module> model,
               std::shared_ptr<torch::optim::Optimizer> optimizer) override;
  void set_gradient_sync(bool enabled) override;
  bool gradient_sync() const override { return sync_; }
  void after_backward() override;
  double grad_norm() override;
  void scale_grads(double factor) override;
  void step(torch::optim::Optimizer& optimizer) override;
  void zero_grad(torch::optim::Optimizer& optimizer) override;
  ShardedStateDict state_dict(torch::optim::Optimizer& optimizer) override;
  ShardedStateDict load_targets(torch::optim::Optimizer& optimizer) override;
  void finish_load(torch::optim::Optimizer& optimizer) override;
  MemoryAccount memory(torch::optim::Optimizer& optimizer) const override;

  int stage() const { return static_cast<int>(config_.stage); }
  bool offload() const { return offload_; }
  /// The tensor the optimizer holds for trainable parameter i (its rows, or
  /// their host master copy), and the split of that parameter.
  const at::Tensor& shard_param(size_t i) const { return sharded_.shard_params[i]; }
  const ParamShard& shard(size_t i) const { return sharded_.shards[i]; }
  const std::vector<at::Tensor>& params() const { return sharded_.params; }
  /// Stage 1's DDP reducer / stage 2's reduce-scatter (after prepare).
  Reducer& all_reducer();
  GradShardReducer& shard_reducer();

 private:
  void require_prepared(const char* what) const;
  /// The averaged gradient rows of parameter i on its device (undefined if none).
  at::Tensor device_shard_grad(size_t i) const;
  void attach_shard_grads();
  /// offload_optimizer = cpu: the host step, pipelined with the copies.
  void offloaded_step(torch::optim::Optimizer& optimizer);

  ZeroConfig config_;
  std::optional<at::ScalarType> reduce_dtype_;  // gradient collectives (mixed precision)
  std::shared_ptr<Communicator> comm_;
  bool offload_ = false;
  bool sync_ = true;
  std::shared_ptr<torch::nn::Module> model_;
  RowShardedParams sharded_;  // trainable, distinct, full params; what the optimizer holds
  std::vector<at::Tensor> host_grads_;    // offload: host gradient rows (pinned on a GPU)
  std::vector<at::Tensor> device_rows_;   // offload: this rank's rows of each parameter
  std::unordered_map<const void*, size_t> master_index_;  // offload: master -> parameter
  OffloadCopies copies_{std::chrono::minutes(5)};
  std::unique_ptr<Reducer> all_reducer_;
  std::unique_ptr<GradShardReducer> shard_reducer_;
  GradSync* grad_sync_ = nullptr;  ///< whichever of the two the stage uses
  std::unique_ptr<ParamGather> gather_;
  PendingSteps pending_steps_;
};

}  // namespace mpiaccel::detail
