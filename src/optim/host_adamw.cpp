// The fused host AdamW (DeepSpeed's CPU-Adam idea, in our own code): one pass
// over the shard per step instead of LibTorch's ~8 tensor ops with a
// temporary, vectorised by the compiler and split over the intra-op threads.
//
// Exactly torch::optim::AdamW (LibTorch 1.13) per element, in float:
//   p  = p * float(1 - lr*wd)                        (only when wd != 0)
//   m  = fma(g, float(1 - b1), m * float(b1))        exp_avg.mul_(b1).add_(g, 1-b1)
//   v  = fma(float(1 - b2) * g, g, v * float(b2))    exp_avg_sq.mul_(b2).addcmul_(g, g, 1-b2)
//   vm = max(vm, v)                                   (amsgrad)
//   d  = sqrt(v or vm) / float(sqrt(bc2)) + float(eps)
//   p  = p + (float(-lr/bc1) * m) / d                 p.addcdiv_(m, d, -lr/bc1)
// The two fused multiply-adds are where LibTorch's AVX2 kernels fuse
// (Vectorized::fmadd in add, a contracted multiply-add in addcmul); verified
// bit-identical on an AVX2+FMA CPU by tests/unit/test_host_adamw.cpp. On a CPU
// without FMA LibTorch does not fuse, and neither does the portable kernel here.

#include <ATen/core/grad_mode.h>
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/optim/adamw.h>

#include <cmath>
#include <memory>

#include "mpiaccel/error.hpp"
#include "runtime/torch_compat.hpp"
#include "mpiaccel/optim.hpp"
#include "optim/adamw_state.hpp"
#include "core/dtype_names.hpp"

namespace mpiaccel {
namespace {

struct Coefficients {
  float decay = 1;       // 1 - lr*wd
  bool apply_decay = false;
  float beta1 = 0, one_minus_beta1 = 0;
  float beta2 = 0, one_minus_beta2 = 0;
  float sqrt_bc2 = 1;    // sqrt(1 - beta2^step)
  float eps = 0;
  float neg_step_size = 0;  // -lr / (1 - beta1^step)
};

// Elements [0, n) of one parameter's shard. `Fused` picks fmaf (compiled to
// vfmadd under target fma) or a separate multiply and add.
template <bool Fused>
__attribute__((always_inline)) inline void adamw_kernel(
    float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v,
    float* __restrict vmax, int64_t n, const Coefficients& c) {
  const float decay = c.apply_decay ? c.decay : 1.0f;
  const float b1 = c.beta1, cb1 = c.one_minus_beta1, b2 = c.beta2, cb2 = c.one_minus_beta2;
  const float sqrt_bc2 = c.sqrt_bc2, eps = c.eps, nss = c.neg_step_size;
  if (vmax == nullptr) {
    for (int64_t i = 0; i < n; ++i) {
      const float gi = g[i];
      // Multiplying by 1.0f when wd == 0 is exact: same bits as skipping it.
      const float pi = p[i] * decay;
      const float mi = Fused ? __builtin_fmaf(gi, cb1, m[i] * b1) : m[i] * b1 + cb1 * gi;
      const float vi = Fused ? __builtin_fmaf(cb2 * gi, gi, v[i] * b2) : v[i] * b2 + cb2 * gi * gi;
      m[i] = mi;
      v[i] = vi;
      const float denom = __builtin_sqrtf(vi) / sqrt_bc2 + eps;
      p[i] = pi + (nss * mi) / denom;
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const float gi = g[i];
      const float pi = p[i] * decay;
      const float mi = Fused ? __builtin_fmaf(gi, cb1, m[i] * b1) : m[i] * b1 + cb1 * gi;
      const float vi = Fused ? __builtin_fmaf(cb2 * gi, gi, v[i] * b2) : v[i] * b2 + cb2 * gi * gi;
      m[i] = mi;
      v[i] = vi;
      // torch::max_out propagates NaN.
      const float old = vmax[i];
      const float vm = (vi > old || vi != vi) ? vi : old;
      vmax[i] = vm;
      const float denom = __builtin_sqrtf(vm) / sqrt_bc2 + eps;
      p[i] = pi + (nss * mi) / denom;
    }
  }
}

__attribute__((target("avx2,fma"))) void adamw_avx2_fma(float* p, const float* g, float* m,
                                                        float* v, float* vmax, int64_t n,
                                                        const Coefficients& c) {
  adamw_kernel<true>(p, g, m, v, vmax, n, c);
}

void adamw_portable(float* p, const float* g, float* m, float* v, float* vmax, int64_t n,
                    const Coefficients& c) {
  adamw_kernel<false>(p, g, m, v, vmax, n, c);
}

using Kernel = void (*)(float*, const float*, float*, float*, float*, int64_t, const Coefficients&);

Kernel pick_kernel() {
  // Runtime choice, like ATen's CPU capability dispatch.
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return adamw_avx2_fma;
  return adamw_portable;
}

void check_host_float(const at::Tensor& t, const char* what) {
  MPIACCEL_CHECK(t.device().is_cpu() && t.scalar_type() == at::kFloat && t.is_contiguous(),
                 std::string("host AdamW: the ") + what +
                     " must be a contiguous float32 CPU tensor, got " + dtype_name(t.scalar_type()) +
                     " on " + t.device().str() + (t.is_contiguous() ? "" : " (not contiguous)") +
                     "; use torch::optim::AdamW for other tensors");
}

// One thread's slice is at least this many elements: below it the fork costs
// more than the work.
constexpr int64_t kGrainSize = int64_t{1} << 15;

}  // namespace

void host_adamw_step(torch::optim::AdamW& optimizer) { host_adamw_step(optimizer, HostStepHooks{}); }

void host_adamw_step(torch::optim::AdamW& optimizer, const HostStepHooks& hooks) {
  static const Kernel kernel = pick_kernel();
  at::NoGradGuard no_grad;
  for (auto& group : optimizer.param_groups()) {
    const auto& options = static_cast<const torch::optim::AdamWOptions&>(group.options());
    for (const at::Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      if (hooks.before) hooks.before(p);
      const at::Tensor& grad = p.grad();
      MPIACCEL_CHECK(!grad.is_sparse(), "host AdamW: sparse gradients are not supported");
      check_host_float(p, "parameter");
      check_host_float(grad, "gradient");
      MPIACCEL_CHECK(grad.numel() == p.numel(), "host AdamW: gradient and parameter sizes differ");
      auto& state = detail::adamw_state_of(optimizer, p, options.amsgrad());
      check_host_float(state.exp_avg(), "exp_avg state");
      check_host_float(state.exp_avg_sq(), "exp_avg_sq state");
      if (options.amsgrad()) check_host_float(state.max_exp_avg_sq(), "max_exp_avg_sq state");

      state.step(state.step() + 1);
      const double beta1 = std::get<0>(options.betas());
      const double beta2 = std::get<1>(options.betas());
      const double bias_correction1 = 1 - std::pow(beta1, state.step());
      const double bias_correction2 = 1 - std::pow(beta2, state.step());
      Coefficients c;
      c.apply_decay = options.weight_decay() != 0;
      c.decay = static_cast<float>(1 - options.lr() * options.weight_decay());
      c.beta1 = static_cast<float>(beta1);
      c.one_minus_beta1 = static_cast<float>(1 - beta1);
      c.beta2 = static_cast<float>(beta2);
      c.one_minus_beta2 = static_cast<float>(1 - beta2);
      c.sqrt_bc2 = static_cast<float>(std::sqrt(bias_correction2));
      c.eps = static_cast<float>(options.eps());
      c.neg_step_size = static_cast<float>(-(options.lr() / bias_correction1));

      float* pd = p.data_ptr<float>();
      const float* gd = grad.data_ptr<float>();
      float* md = state.exp_avg().data_ptr<float>();
      float* vd = state.exp_avg_sq().data_ptr<float>();
      float* vmax = options.amsgrad() ? state.max_exp_avg_sq().data_ptr<float>() : nullptr;
      at::parallel_for(0, p.numel(), kGrainSize, [&](int64_t begin, int64_t end) {
        kernel(pd + begin, gd + begin, md + begin, vd + begin, vmax ? vmax + begin : nullptr,
               end - begin, c);
      });
      if (hooks.after) hooks.after(p);
    }
  }
}

}  // namespace mpiaccel
