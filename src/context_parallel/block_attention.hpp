#pragma once
// Attention of a block of queries over a block of keys, returning the
// log-sum-exp of each query's scores beside the output, and its backward
// given the merged output and log-sum-exp: what ring attention is made of.
// One kernel per LibTorch: the CPU flash kernel where LibTorch has it (the
// [Tq, Tk] weights never stored), else the explicit product.

#include <ATen/core/Tensor.h>

namespace mpiaccel::cp::detail {

/// A block's softmax-weighted values and the log-sum-exp of its scores.
struct Partial {
  at::Tensor out;  ///< [B, H, Tq, D], q's dtype
  at::Tensor lse;  ///< [B, H, Tq], float32
};

struct BlockGrads {
  at::Tensor dq, dk, dv;
};

/// softmax(q kᵀ / sqrt(D)) v over keys `k`, `v` [B, H, Tk, D]; `causal`:
/// query i sees keys 0..i (Tq = Tk, the block on the diagonal).
Partial block_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal);

/// The gradients of this block's share of attention, given the gradient
/// `dout` of the whole (merged) output `out` and its log-sum-exp `lse`
/// (FlashAttention's backward: the block's weights are exp(s − lse)).
BlockGrads block_attention_backward(const at::Tensor& dout, const at::Tensor& q, const at::Tensor& k,
                                    const at::Tensor& v, const at::Tensor& out, const at::Tensor& lse,
                                    bool causal);

/// Causal attention over a whole sequence, differentiable by autograd
/// (LibTorch's fused kernel where it has one).
at::Tensor whole_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);

/// Grouped-query attention's key/value heads, [B, kv, T, D], each serving
/// `n_rep` consecutive query heads: [B, kv·n_rep, T, D] (x itself when n_rep is 1).
at::Tensor repeat_heads(const at::Tensor& x, int64_t n_rep);
/// The adjoint of repeat_heads: each head's n_rep copies' gradients summed.
at::Tensor sum_repeated_heads(const at::Tensor& grad, int64_t n_rep);

/// Whether block_attention runs a fused kernel for tensors like `q`.
bool fused_block_kernel(const at::Tensor& q);

}  // namespace mpiaccel::cp::detail
