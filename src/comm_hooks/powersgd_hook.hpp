#pragma once
// PowerSGD (Vogels et al. 2019) as a DDP communication hook, after PyTorch's
// ddp_comm_hooks/powerSGD_hook.py (docs/ddp.md, "PowerSGD").
//
// Per bucket, after start_iter plain all-reduces:
//   1. error feedback: M += e (the error this rank's compression left last step)
//   2. P = M Q for every compressed matrix; one all-reduce (sum) carries the
//      P's and the gradients left uncompressed (1-D, or too small to gain)
//   3. when backward ends: P̂ = orthogonalize(P); Q = Mᵀ P̂; all-reduce Q
//      (mean); M ← P̂ Qᵀ; e = M_local − M; Q is kept (warm start)
// Matrices: each gradient viewed as [shape[0], rest] (PowerSGD), or the
// whole bucket as one square matrix, padded (batched PowerSGD).
// Checkpoints carry the iteration, every rank's error feedback and, per
// gradient, the warm-start Q (batched: its per-bucket Q is not saved).

#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "mpiaccel/comm_hook.hpp"

namespace mpiaccel::detail {

class PowerSgdHook final : public CommHook {
 public:
  explicit PowerSgdHook(PowerSgdOptions options);

  std::string name() const override { return options_.batched ? "batched_powersgd" : "powersgd"; }
  void attach(const std::vector<at::Tensor>& params, const std::vector<std::string>& names,
              Communicator& comm) override;
  HookWork launch(GradBucket& bucket) override;
  void add_state(ShardedStateDict& dict) override;
  void add_load_targets(ShardedStateDict& dict) override;
  void finish_load() override;
  int64_t state_bytes() const override;

  /// Synchronized steps seen so far.
  int64_t iteration() const { return iteration_; }
  /// Parameter `param`'s warm-start Q (undefined: not compressed, or batched)
  /// and this rank's error feedback (undefined without).
  const at::Tensor& warm_start_q(size_t param) const { return params_.at(param).q; }
  const at::Tensor& error(size_t param) const { return params_.at(param).error; }
  /// Batched: the Q bucket `index` starts from when its matrix is side × side.
  at::Tensor initial_bucket_q(size_t index, int64_t side) const;
  /// Batched: bucket `index`'s Q (undefined before its first compressed step).
  at::Tensor bucket_q(size_t index) const {
    auto it = bucket_q_.find(index);
    return it == bucket_q_.end() ? at::Tensor() : it->second;
  }

 private:
  struct ParamState {
    std::string name;
    int64_t rows = 0;
    int64_t cols = 0;
    int64_t rank = 0;  // of its approximation; 0: sent uncompressed (PowerSGD)
    at::Tensor q;      // [cols, rank]: the warm start
    at::Tensor error;  // [numel]: this rank's compression error; undefined without feedback
  };
  struct Flight;

  bool compressed(size_t param) const { return options_.batched || params_[param].rank > 0; }
  // Seeds of the random Qs: per parameter or bucket, and per step without warm start.
  uint64_t param_key(size_t param) const { return param + step_key(); }
  uint64_t bucket_key(size_t bucket) const { return (uint64_t(1) << 62) + bucket + step_key(); }
  uint64_t step_key() const { return options_.warm_start ? 0 : uint64_t(iteration_) << 32; }
  at::Tensor fresh_q(int64_t cols, int64_t rank, uint64_t key, const at::TensorOptions& options) const;
  std::string summary() const;
  HookWork plain_all_reduce(GradBucket& bucket);
  std::shared_ptr<Flight> plan(GradBucket& bucket);
  void finish(Flight& flight);
  std::string state_name(const std::string& what) const { return "comm_hook/" + name() + "/" + what; }

  PowerSgdOptions options_;
  Communicator* comm_ = nullptr;
  std::vector<ParamState> params_;
  std::map<size_t, at::Tensor> bucket_q_;  // batched: each bucket's Q
  int64_t iteration_ = 0;
  at::Tensor loaded_iteration_;  // the load target of iteration_
};

}  // namespace mpiaccel::detail
