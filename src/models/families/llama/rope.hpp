#pragma once
// Rotary position embeddings (Su et al. 2021) as transformers' Llama computes
// them (modeling_rope_utils.py), so that logits agree to float rounding:
// inverse frequencies in float32, Llama 3.1's long-context rescaling, cos and
// sin of position x frequency in float32, then cast to the activations' dtype.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <utility>

#include "mpiaccel/models.hpp"

namespace mpiaccel::detail {

class RotaryEmbedding {
 public:
  /// Frequencies for heads of `spec.head_width()`, with spec's rope_theta and
  /// rope_scaling (none | llama3). Throws Error on an odd head width or an
  /// unknown scaling.
  explicit RotaryEmbedding(const ModelSpec& spec);

  /// cos and sin [length, head width] of positions start .. start+length-1,
  /// on `device` in `dtype`. The last tables are kept: a training step
  /// (positions 0 .. seq_len-1 every time) computes and copies nothing.
  std::pair<at::Tensor, at::Tensor> cos_sin(int64_t start, int64_t length, at::Device device,
                                            at::ScalarType dtype) const;

  /// cos and sin [n, head width] of the n positions `positions` (int64, on
  /// the tables' device), in `dtype`: computed each call.
  std::pair<at::Tensor, at::Tensor> cos_sin_at(const at::Tensor& positions, at::ScalarType dtype) const;

  /// The inverse frequencies [head width / 2], float32 on the CPU.
  const at::Tensor& inverse_frequencies() const { return inv_freq_; }

 private:
  at::Tensor inv_freq_;
  // The last tables cos_sin made, and what they were made for.
  mutable std::pair<at::Tensor, at::Tensor> tables_;
  mutable int64_t tables_start_ = -1, tables_length_ = -1;
};

/// x · cos + rotate_half(x) · sin for x [B, H, T, D] and cos, sin [T, D].
at::Tensor apply_rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

}  // namespace mpiaccel::detail
