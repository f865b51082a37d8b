#pragma once
// Mixed precision (docs/precision.md): which dtype each kind of tensor uses,
// autocast for the forward, and dynamic loss scaling for fp16.
//
// Following FSDP's MixedPrecision, a policy has three dtypes:
//   param_dtype  — compute: the forward runs in it (autocast on CPU bf16 and
//                  CUDA bf16/fp16; FSDP/ZeRO-3 gather parameters in it);
//   reduce_dtype — gradient communication (DDP buckets, reduce-scatters);
//   buffer_dtype — module buffers.
// [distributed] mixed_precision = no | bf16 | fp16 sets all three; each can be
// overridden by [distributed] param_dtype / reduce_dtype / buffer_dtype. Master
// weights, the gradients the optimizer reads and the optimizer state stay fp32
// whatever the policy.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mpiaccel/config.hpp"

namespace torch::optim {
class Optimizer;
}

namespace mpiaccel {

class Communicator;

struct PrecisionPolicy {
  MixedPrecision mixed_precision = MixedPrecision::No;  ///< as configured
  at::ScalarType param_dtype = at::kFloat;   ///< compute
  at::ScalarType reduce_dtype = at::kFloat;  ///< gradient communication
  at::ScalarType buffer_dtype = at::kFloat;  ///< buffers
  /// Master weights, optimizer gradients and optimizer state: always fp32.
  static constexpr at::ScalarType kMasterDtype = at::kFloat;

  /// The policy of [distributed] mixed_precision and its dtype overrides.
  static PrecisionPolicy from_config(const DistributedConfig& config);

  /// True when the forward computes in a lower precision than fp32.
  bool autocast() const { return param_dtype != at::kFloat; }
  /// True when fp16 is on the gradient path (compute or reduction), where
  /// small gradients underflow: the run needs a GradScaler. bf16 has fp32's
  /// exponent range and needs none.
  bool needs_grad_scaler() const { return param_dtype == at::kHalf || reduce_dtype == at::kHalf; }
  /// "param=bf16 reduce=fp32 buffer=bf16", for logs.
  std::string describe() const;
};

/// The dtype collectives cast floating-point tensors to for a policy dtype:
/// nullopt for fp32 (communicate in the tensor's own dtype, no cast), else
/// `policy_dtype` (bf16/fp16).
std::optional<at::ScalarType> wire_dtype(at::ScalarType policy_dtype);

/// "fp32", "bf16", "fp16" (else the ATen name).
std::string precision_dtype_name(at::ScalarType dtype);
/// The dtype of "fp32" | "bf16" | "fp16" (also "float32", "bfloat16",
/// "float16"). Throws Error naming the accepted values otherwise.
at::ScalarType parse_precision_dtype(const std::string& name);

/// FSDP's gradient pre/post-division for a reduction over `world_size` ranks
/// in a 16-bit dtype: divide by `first` before the sum and by `second` after,
/// first·second = world_size, first ≈ sqrt(world_size) a power of two, so
/// neither the summands underflow nor the sum overflows.
std::pair<double, double> gradient_divide_factors(int world_size);

/// How a gradient reduction over `world_size` ranks divides, by the dtype on
/// the wire (nullopt: the gradients' own): 32-bit and wider in one step,
/// `before` = 1/world_size in the copy into the buffer; 16-bit over several
/// ranks (`split`) in two, `before` = 1/first and `after` = 1/second of
/// gradient_divide_factors.
struct GradientDivision {
  double before = 1.0;
  double after = 1.0;
  bool split = false;
};
GradientDivision gradient_division(int world_size, std::optional<at::ScalarType> wire);

/// Enables autocast to `dtype` for the current thread while alive: CPU
/// (bf16 only: LibTorch 1.13 has no CPU fp16 kernels for addmm) or CUDA (bf16,
/// fp16), chosen by `device` ("cpu", "cuda", "cuda:N"). fp32 makes it a no-op.
/// Restores the previous autocast state on destruction and clears the cast
/// cache when the outermost guard of the thread ends. Wrap the forward and
/// the loss, not backward (PyTorch's rule: backward runs in the dtypes the
/// forward chose).
class AutocastGuard {
 public:
  AutocastGuard(const std::string& device, at::ScalarType dtype);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

  /// Whether this guard changed anything (false for fp32).
  bool active() const { return active_; }

 private:
  bool active_ = false;
  bool cuda_ = false;
  bool previous_enabled_ = false;
  at::ScalarType previous_dtype_ = at::kFloat;
};

/// Dynamic loss scaling (torch.cuda.amp.GradScaler / Accelerate's defaults).
struct GradScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;  ///< steps without inf/nan before the scale grows
  bool enabled = true;             ///< false: scale 1, never skips (fp32 / bf16 runs)
};

/// The scale of an fp16 run. One step:
///   backward(scaler.scale(loss));          // loss · S
///   scaler.unscale_(grads);                // grads / S, inf/nan noted (clip after this)
///   scaler.step([&] { optimizer.step(); }); // agrees across ranks, steps or skips
///   scaler.update();                       // backs off or grows S
/// Ranks hold different gradients under ZeRO/FSDP (shards), so "found inf"
/// is agreed with one all_reduce (max) over `comm`: the step is skipped on
/// every rank or on none, and every rank's scale stays the same.
class GradScaler {
 public:
  /// `comm` may be null for a single process. `flag_device` is where the
  /// found-inf flag lives for the all_reduce: the communicator's device
  /// ("cpu" for MPI, "cuda:N" for NCCL).
  explicit GradScaler(GradScalerOptions options = {},
                      std::shared_ptr<Communicator> comm = nullptr,
                      const std::string& flag_device = "cpu");

  bool enabled() const { return options_.enabled; }
  const GradScalerOptions& options() const { return options_; }
  /// The current scale S (1 when disabled).
  double scale() const { return options_.enabled ? scale_ : 1.0; }
  /// Steps without inf/nan since the scale last changed.
  int64_t growth_tracker() const { return growth_tracker_; }

  /// `loss` · S (the loss itself when disabled).
  at::Tensor scale(const at::Tensor& loss) const;

  /// Divides `grads` (the gradients the optimizer will apply; undefined ones
  /// are skipped) by S in place and notes whether any element is inf or
  /// nan. Once per step: a second call before update() does nothing, so
  /// clip_grad_norm and step may both call it. Local, no communication.
  void unscale_(const std::vector<at::Tensor>& grads);
  /// Whether unscale_ ran since the last update().
  bool unscaled() const { return unscaled_; }

  /// Agrees "found inf" across the ranks (one all_reduce, max) and returns
  /// true when every rank's gradients were finite. Unscales nothing: call
  /// unscale_ first. Cached until update(). Collective over comm when
  /// enabled: every rank calls it, in the same order (disabled: no
  /// communication, always true).
  bool agree_finite();
  /// Runs `optimizer_step` unless some rank found inf/nan (agree_finite());
  /// returns whether it ran. Collective over comm.
  bool step(const std::function<void()>& optimizer_step);
  /// Backs the scale off after a skipped step, or grows it after
  /// growth_interval finite steps; then starts the next step. Needs
  /// agree_finite() (or step()) since the last update(). Every rank computes
  /// the same scale from the agreed flag, so no communication.
  void update();

  /// Steps skipped since construction (or load_state), for logs.
  int64_t skipped_steps() const { return skipped_steps_; }

  /// {"scale", "growth_tracker"} as text (exact: %.17g), for checkpoints.
  std::map<std::string, std::string> state() const;
  /// Restores state(); throws Error on a missing or malformed entry.
  void load_state(const std::map<std::string, std::string>& state);

 private:
  GradScalerOptions options_;
  std::shared_ptr<Communicator> comm_;
  std::string flag_device_;
  double scale_;
  int64_t growth_tracker_ = 0;
  int64_t skipped_steps_ = 0;
  bool unscaled_ = false;
  bool local_found_inf_ = false;
  at::Tensor device_found_inf_;  ///< GPU gradients' flag, still on the device
  bool agreed_ = false;
  bool agreed_found_inf_ = false;
};

/// The gradients of `optimizer`'s parameters (defined ones only): what
/// GradScaler::unscale_ takes. Under ZeRO/FSDP the optimizer holds this
/// rank's shards, so these are the sharded gradients.
std::vector<at::Tensor> optimizer_grads(torch::optim::Optimizer& optimizer);

}  // namespace mpiaccel
