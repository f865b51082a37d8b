// Block attention with its log-sum-exp (block_attention.hpp).

#include "context_parallel/block_attention.hpp"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <tuple>

#include "runtime/torch_compat.hpp"

// LibTorch 2.2 brought the CPU flash kernel that returns the log-sum-exp.
#define MPIACCEL_CPU_FLASH_ATTENTION MPIACCEL_TORCH_AT_LEAST(2, 2)

namespace mpiaccel::cp::detail {
namespace {

// Autocast off while a block's products run: they are float32 on purpose
// (the log-sum-exp of forward must be the one backward recomputes against).
class NoAutocast {
 public:
  explicit NoAutocast(const at::Tensor& like)
      : device_(like.device().type()),
        enabled_(mpiaccel::detail::autocast_enabled(device_)),
        dtype_(mpiaccel::detail::autocast_dtype(device_)) {
    if (enabled_) mpiaccel::detail::set_autocast(device_, false, dtype_);
  }
  ~NoAutocast() {
    if (enabled_) mpiaccel::detail::set_autocast(device_, true, dtype_);
  }
  NoAutocast(const NoAutocast&) = delete;
  NoAutocast& operator=(const NoAutocast&) = delete;

 private:
  c10::DeviceType device_;
  bool enabled_;
  at::ScalarType dtype_;
};

double scale_of(const at::Tensor& q) { return 1.0 / std::sqrt(static_cast<double>(q.size(-1))); }

// The scores q kᵀ / sqrt(D) in float32, the future masked out when causal.
at::Tensor scores(const at::Tensor& q, const at::Tensor& k, bool causal) {
  at::Tensor s = at::matmul(q.to(at::kFloat), k.to(at::kFloat).transpose(-2, -1)) * scale_of(q);
  if (!causal) return s;
  const at::Tensor future = at::ones({q.size(-2), k.size(-2)}, q.options().dtype(at::kBool)).triu(1);
  return s.masked_fill(future, -std::numeric_limits<double>::infinity());
}

Partial explicit_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal) {
  const NoAutocast float32_products(q);
  const at::Tensor s = scores(q, k, causal);
  const at::Tensor lse = at::logsumexp(s, -1);
  const at::Tensor weights = at::exp(s - lse.unsqueeze(-1));
  return {at::matmul(weights, v.to(at::kFloat)).to(q.scalar_type()), lse};
}

BlockGrads explicit_backward(const at::Tensor& dout, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                             const at::Tensor& out, const at::Tensor& lse, bool causal) {
  const NoAutocast float32_products(q);
  const at::Tensor weights = at::exp(scores(q, k, causal) - lse.unsqueeze(-1));
  const at::Tensor dy = dout.to(at::kFloat);
  const at::Tensor dv = at::matmul(weights.transpose(-2, -1), dy);
  const at::Tensor dweights = at::matmul(dy, v.to(at::kFloat).transpose(-2, -1));
  const at::Tensor delta = (dy * out.to(at::kFloat)).sum(-1, /*keepdim=*/true);
  const at::Tensor ds = weights * (dweights - delta) * scale_of(q);
  const at::Tensor dq = at::matmul(ds, k.to(at::kFloat));
  const at::Tensor dk = at::matmul(ds.transpose(-2, -1), q.to(at::kFloat));
  return {dq.to(q.scalar_type()), dk.to(k.scalar_type()), dv.to(v.scalar_type())};
}

}  // namespace

at::Tensor repeat_heads(const at::Tensor& x, int64_t n_rep) {
  if (n_rep == 1) return x;
  const auto s = x.sizes();
  return x.unsqueeze(2).expand({s[0], s[1], n_rep, s[2], s[3]}).reshape({s[0], s[1] * n_rep, s[2], s[3]});
}

at::Tensor sum_repeated_heads(const at::Tensor& grad, int64_t n_rep) {
  if (n_rep == 1) return grad;
  const auto s = grad.sizes();
  return grad.reshape({s[0], s[1] / n_rep, n_rep, s[2], s[3]}).sum(2);
}

bool fused_block_kernel(const at::Tensor& q) {
#if MPIACCEL_CPU_FLASH_ATTENTION
  return q.is_cpu();
#else
  (void)q;
  return false;
#endif
}

Partial block_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal) {
#if MPIACCEL_CPU_FLASH_ATTENTION
  if (fused_block_kernel(q)) {
    auto [out, lse] = at::_scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal);
    return {out, lse};
  }
#endif
  return explicit_forward(q, k, v, causal);
}

BlockGrads block_attention_backward(const at::Tensor& dout, const at::Tensor& q, const at::Tensor& k,
                                    const at::Tensor& v, const at::Tensor& out, const at::Tensor& lse,
                                    bool causal) {
#if MPIACCEL_CPU_FLASH_ATTENTION
  if (fused_block_kernel(q)) {
    auto [dq, dk, dv] = at::_scaled_dot_product_flash_attention_for_cpu_backward(dout, q, k, v, out, lse, 0.0, causal);
    return {dq, dk, dv};
  }
#endif
  return explicit_backward(dout, q, k, v, out, lse, causal);
}

at::Tensor whole_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
#if MPIACCEL_TORCH_AT_LEAST(2, 0)
  return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, 0.0, /*is_causal=*/true);
#else
  const at::Tensor s = scores(q, k, /*causal=*/true);
  return at::matmul(at::softmax(s, -1), v.to(at::kFloat)).to(q.scalar_type());
#endif
}

}  // namespace mpiaccel::cp::detail
