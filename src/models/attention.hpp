#pragma once
// Causal self-attention over heads, the one place that knows which kernels
// the LibTorch offers.

#include <ATen/core/Tensor.h>

namespace mpiaccel::detail {

/// softmax(q kᵀ / sqrt(head_dim) + causal mask) v, with dropout `dropout_p`
/// on the attention weights; q, k, v are [batch, heads, time, head_dim].
/// LibTorch 2.x: at::scaled_dot_product_attention (flash or memory-efficient
/// kernels on a GPU, a fused kernel on the CPU: the [time, time] weights are
/// never stored). 1.13: the explicit product, mask and softmax.
at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            double dropout_p);

/// Attention of a block of new queries `q` [B, H, L, D] that are the last L
/// positions of the keys and values `k`, `v` [B, H, S, D] (a KV cache holds
/// the first S - L): each query sees every key up to its own position. L is
/// S (a prompt into an empty cache) or 1 (one token after the cache).
at::Tensor attention_after_cache(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);

/// A model's attention over its heads (this rank's, when split by tensor
/// parallelism): attention_after_cache when `after_cache`, else
/// causal_attention with dropout drawn from the rank's own stream
/// (tp::RegionRng), so split heads draw their own masks.
at::Tensor heads_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool after_cache,
                           double dropout_p);

/// Whether causal_attention runs LibTorch's fused kernel.
bool fused_attention_available();

}  // namespace mpiaccel::detail
