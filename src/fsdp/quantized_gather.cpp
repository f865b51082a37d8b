// The int8 block quantization of ZeRO++'s weight all-gather (see quantized_gather.hpp).

#include "fsdp/quantized_gather.hpp"

#include <ATen/ATen.h>

namespace mpiaccel::detail {
namespace {

int64_t align4(int64_t bytes) { return (bytes + 3) / 4 * 4; }

}  // namespace

QuantizedBlock quantized_block(int64_t values, int64_t tags) {
  QuantizedBlock layout;
  layout.values = values;
  layout.groups = (values + kQuantGroup - 1) / kQuantGroup;
  layout.tags = tags;
  layout.scales_at = align4(values);
  layout.tags_at = layout.scales_at + 4 * layout.groups;
  layout.stride = layout.tags_at + 4 * tags;
  return layout;
}

void quantize_blocks(const at::Tensor& rows, const at::Tensor& tags, const QuantizedBlock& layout, at::Tensor out) {
  const int64_t parts = rows.size(0);
  const int64_t padded = layout.groups * kQuantGroup;
  at::Tensor x = at::constant_pad_nd(rows.to(at::kFloat), {0, padded - layout.values})
                     .view({parts, layout.groups, kQuantGroup});
  at::Tensor scale = x.abs().amax(2).div_(127.0);
  scale.masked_fill_(scale == 0, 1.0);  // an all-zero group: any scale, its values stay 0
  at::Tensor q = x.div(scale.unsqueeze(2)).round_().clamp_(-127, 127).to(at::kChar).view({parts, padded});
  at::Tensor blocks = out.view({parts, layout.stride});
  blocks.narrow(1, 0, layout.values).view(at::kChar).copy_(q.narrow(1, 0, layout.values));
  blocks.narrow(1, layout.scales_at, 4 * layout.groups).view(at::kFloat).copy_(scale);
  if (layout.tags > 0) blocks.narrow(1, layout.tags_at, 4 * layout.tags).view(at::kFloat).copy_(tags);
}

at::Tensor dequantize_blocks(const at::Tensor& gathered, const QuantizedBlock& layout, int64_t parts,
                             const at::TensorOptions& options) {
  const at::Tensor rows = gathered.view({parts, layout.stride});
  const at::Tensor q = rows.narrow(1, 0, layout.values).view(at::kChar);
  const at::Tensor scales = rows.narrow(1, layout.scales_at, 4 * layout.groups).contiguous().view(at::kFloat);
  const at::Tensor tags = rows.narrow(1, layout.tags_at, 4 * layout.tags).contiguous().view(at::kFloat);
  at::Tensor out = at::empty({parts, layout.values + layout.tags}, options);
  const at::Tensor per_value = scales.repeat_interleave(kQuantGroup, 1).narrow(1, 0, layout.values);
  at::Tensor values = out.narrow(1, 0, layout.values);
  at::mul_out(values, q.to(at::kFloat), per_value);
  out.narrow(1, layout.values, layout.tags).copy_(tags);
  return out.view({-1});
}

}  // namespace mpiaccel::detail
