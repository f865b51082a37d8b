// causal_attention: one definition per LibTorch generation (see attention.hpp).

#include "models/attention.hpp"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>

#include "mpiaccel/error.hpp"
#include "mpiaccel/tensor_parallel.hpp"
#include "runtime/torch_compat.hpp"

namespace mpiaccel::detail {
namespace {

// One new query after the cache sees every key: no mask.
at::Tensor unmasked_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);

}  // namespace

at::Tensor heads_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool after_cache,
                           double dropout_p) {
  if (after_cache) return attention_after_cache(q, k, v);
  if (dropout_p == 0.0) return causal_attention(q, k, v, 0.0);  // no draws: no stream to swap in
  const tp::RegionRng own_heads(q.device());
  return causal_attention(q, k, v, dropout_p);
}

at::Tensor attention_after_cache(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  const int64_t queries = q.size(-2);
  if (queries == k.size(-2)) return causal_attention(q, k, v, 0.0);
  MPIACCEL_CHECK(queries == 1, "attention after a KV cache takes one new position at a time, not " +
                                   std::to_string(queries));
  return unmasked_attention(q, k, v);
}

#if MPIACCEL_TORCH_AT_LEAST(2, 0)

at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            double dropout_p) {
  return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, dropout_p, /*is_causal=*/true);
}

namespace {
at::Tensor unmasked_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  return at::scaled_dot_product_attention(q, k, v);
}
}  // namespace

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

namespace {
at::Tensor unmasked_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  const at::Tensor att = at::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(q.size(-1))));
  return at::matmul(at::softmax(att, -1), v);
}
}  // namespace

bool fused_attention_available() { return false; }

#endif

}  // namespace mpiaccel::detail
