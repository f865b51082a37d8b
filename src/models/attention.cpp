// causal_attention: one definition per LibTorch generation (see attention.hpp).

#include "models/attention.hpp"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>

#include "runtime/torch_compat.hpp"

namespace mpiaccel::detail {

#if MPIACCEL_TORCH_AT_LEAST(2, 0)

at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            double dropout_p) {
  return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, dropout_p, /*is_causal=*/true);
}

bool fused_attention_available() { return true; }

#else

at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            double dropout_p) {
  const int64_t time = q.size(-2);
  at::Tensor att = at::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(q.size(-1))));
  // Built per call rather than kept as a buffer: a buffer would be broadcast
  // by DDP and written into every checkpoint for nothing.
  at::Tensor future = at::ones({time, time}, q.options().dtype(at::kBool)).triu(1);
  att = at::softmax(att.masked_fill(future, -std::numeric_limits<double>::infinity()), -1);
  if (dropout_p > 0) att = at::dropout(att, dropout_p, /*train=*/true);
  return at::matmul(att, v);
}

bool fused_attention_available() { return false; }

#endif

}  // namespace mpiaccel::detail
