// Rotary position embeddings (see rope.hpp).

#include "models/families/llama/rope.hpp"

#include <ATen/ATen.h>

#include <cmath>
#include <string>

#include "models/no_computation.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel::detail {
namespace {

// Llama 3.1 (transformers' _compute_llama3_parameters): wavelengths above
// the original context's / low_freq_factor are slowed by `factor`, those
// below its / high_freq_factor kept, and the band between interpolated.
at::Tensor llama3_frequencies(const at::Tensor& inv_freq, const ModelSpec& spec) {
  const double factor = spec.rope_scaling_factor;
  const double low = spec.rope_low_freq_factor, high = spec.rope_high_freq_factor;
  const double old_context = static_cast<double>(spec.rope_original_max_positions);
  MPIACCEL_CHECK(factor > 0 && high > low && old_context > 0,
                 "[model] rope_scaling = llama3 needs rope_scaling_factor > 0, rope_high_freq_factor > "
                 "rope_low_freq_factor and rope_original_max_positions > 0");
  const double low_freq_wavelen = old_context / low;
  const double high_freq_wavelen = old_context / high;
  const at::Tensor wavelen = 2 * M_PI / inv_freq;
  at::Tensor scaled = at::where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq);
  const at::Tensor smooth = (old_context / wavelen - low) / (high - low);
  const at::Tensor smoothed = (1 - smooth) * scaled / factor + smooth * scaled;
  const at::Tensor medium = (wavelen < high_freq_wavelen).logical_not() * (wavelen > low_freq_wavelen).logical_not();
  return at::where(medium, smoothed, scaled);
}

}  // namespace

RotaryEmbedding::RotaryEmbedding(const ModelSpec& spec) {
  const int64_t dim = spec.head_width();
  MPIACCEL_CHECK(dim % 2 == 0, "[model] the Llama's head width " + std::to_string(dim) +
                                   " is odd: rotary embeddings rotate pairs (set n_embd / n_head or head_dim even)");
  MPIACCEL_CHECK(spec.rope_theta > 0, "[model] rope_theta must be positive");
  ComputeHere frequencies;  // also in a shape-only build: llama3's scaling has no meta kernels
  const at::Tensor exponents = at::arange(0, dim, 2, at::kLong).to(at::kFloat) / static_cast<double>(dim);
  inv_freq_ = 1.0 / at::pow(spec.rope_theta, exponents);
  if (spec.rope_scaling == RopeScaling::Llama3) inv_freq_ = llama3_frequencies(inv_freq_, spec);
}

std::pair<at::Tensor, at::Tensor> RotaryEmbedding::cos_sin(int64_t start, int64_t length, at::Device device,
                                                           at::ScalarType dtype) const {
  if (start == tables_start_ && length == tables_length_ && tables_.first.device() == device &&
      tables_.first.scalar_type() == dtype)
    return tables_;
  tables_ = cos_sin_at(at::arange(start, start + length, at::TensorOptions(device).dtype(at::kLong)), dtype);
  tables_start_ = start;
  tables_length_ = length;
  return tables_;
}

std::pair<at::Tensor, at::Tensor> RotaryEmbedding::cos_sin_at(const at::Tensor& positions,
                                                              at::ScalarType dtype) const {
  const at::Tensor freqs = at::outer(positions.to(at::kFloat), inv_freq_.to(positions.device()));
  const at::Tensor angles = at::cat({freqs, freqs}, -1);
  return {angles.cos().to(dtype), angles.sin().to(dtype)};
}

at::Tensor apply_rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  const at::Tensor rotated = at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * cos + rotated * sin;
}

}  // namespace mpiaccel::detail
