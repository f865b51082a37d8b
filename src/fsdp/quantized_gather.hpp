#pragma once
// ZeRO++'s quantized weight all-gather (qwZ; Wang et al. 2023), for FSDP and
// ZeRO-3 ([fsdp] / [zero] quantized_weights, docs/fsdp.md), and the blocks of
// its quantized gradient reduce-scatter (qgZ, quantized_gradients): each rank's
// block of a unit's flat parameters travels as int8, with one float32 scale
// per group of kQuantGroup values (symmetric: scale = max |x| / 127), and is
// dequantized on arrival. A block costs block + 4·groups + 8 bytes instead of
// 4·block: about a quarter of fp32, half of bf16. The master shards stay
// exact; only the parameters a forward or backward computes with are
// rounded, by at most half a scale each. Checkpoints gather exactly.

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace mpiaccel::detail {

constexpr int64_t kQuantGroup = 256;

/// Where the parts of one rank's quantized block lie, in bytes.
struct QuantizedBlock {
  int64_t values = 0;  ///< block values (int8, one byte each)
  int64_t groups = 0;  ///< scales (float32)
  int64_t tags = 0;    ///< the gather's unit tag (float32 values)
  int64_t scales_at = 0, tags_at = 0, stride = 0;  ///< offsets and the whole, 4-byte aligned
};
QuantizedBlock quantized_block(int64_t values, int64_t tags);

/// Writes each row of `rows` ([parts, values], a float dtype) and of `tags`
/// ([parts, tags], float32) into its block of `out` ([parts · stride] uint8,
/// 4-byte aligned): one rank's block for a gather (parts 1), or one block per
/// destination for qgZ's all-to-all.
void quantize_blocks(const at::Tensor& rows, const at::Tensor& tags, const QuantizedBlock& layout, at::Tensor out);

/// The gathered uint8 blocks of `parts` ranks ([parts · stride]) as the
/// unquantized gather would have given them: [parts · (values + tags)] of
/// `options`' dtype, each rank's values dequantized, then its tags.
at::Tensor dequantize_blocks(const at::Tensor& gathered, const QuantizedBlock& layout, int64_t parts,
                             const at::TensorOptions& options);

}  // namespace mpiaccel::detail
