// The padded rank-major flat layout of a unit (see flat_layout.hpp).

#include "fsdp/flat_layout.hpp"

#include <ATen/ATen.h>

#include "mpiaccel/error.hpp"

namespace mpiaccel::detail {

FlatLayout::FlatLayout(const std::vector<std::vector<int64_t>>& shapes, int parts, int index)
    : parts_(parts) {
  MPIACCEL_CHECK(parts >= 1, "FSDP layout: parts must be >= 1");
  for (const auto& shape : shapes) {
    FlatSlot slot;
    slot.shape = shape;
    slot.rows = shape.empty() ? 1 : shape[0];
    slot.row_numel = 1;
    for (size_t d = 1; d < shape.size(); ++d) slot.row_numel *= shape[d];
    slot.numel = slot.rows * slot.row_numel;
    const int64_t chunk_rows = (slot.rows + parts - 1) / parts;
    slot.chunk_numel = chunk_rows * slot.row_numel;
    slot.offset = block_;
    slot.local = chunk_row_range(slot.rows, parts, index);
    block_ += slot.chunk_numel;
    slots_.push_back(std::move(slot));
  }
}

at::Tensor FlatLayout::shard_view(const at::Tensor& local, size_t i) const {
  const FlatSlot& s = slots_.at(i);
  std::vector<int64_t> shape = s.shape;
  if (shape.empty()) shape.push_back(1);
  shape[0] = s.local.count;
  return local.narrow(0, s.offset, s.local.count * s.row_numel).view(shape);
}

void FlatLayout::pack(const at::Tensor& buffer, int64_t stride, size_t i,
                      const at::Tensor& full) const {
  const FlatSlot& s = slots_.at(i);
  if (s.chunk_numel == 0) return;
  const at::Tensor blocks = buffer.view({parts_, stride}).narrow(1, s.offset, s.chunk_numel);
  const at::Tensor flat = full.reshape({-1});
  // Ranks [0, whole) hold a whole chunk, rank `whole` (if any) the rest.
  const int64_t whole = s.numel / s.chunk_numel;
  const int64_t rest = s.numel - whole * s.chunk_numel;
  if (whole > 0)
    blocks.narrow(0, 0, whole).copy_(flat.narrow(0, 0, whole * s.chunk_numel).view({whole, s.chunk_numel}));
  if (whole < parts_) {
    const at::Tensor partial = blocks.select(0, whole);
    if (rest > 0) partial.narrow(0, 0, rest).copy_(flat.narrow(0, whole * s.chunk_numel, rest));
    partial.narrow(0, rest, s.chunk_numel - rest).zero_();
    if (whole + 1 < parts_) blocks.narrow(0, whole + 1, parts_ - whole - 1).zero_();
  }
}

void FlatLayout::unpack(const at::Tensor& buffer, int64_t stride, size_t i,
                        const at::Tensor& full) const {
  const FlatSlot& s = slots_.at(i);
  if (s.chunk_numel == 0) return;
  MPIACCEL_CHECK(full.is_contiguous(), "FSDP layout: unpack needs a contiguous destination");
  const at::Tensor blocks = buffer.view({parts_, stride}).narrow(1, s.offset, s.chunk_numel);
  const at::Tensor flat = full.view({-1});
  const int64_t whole = s.numel / s.chunk_numel;
  const int64_t rest = s.numel - whole * s.chunk_numel;
  if (whole > 0)
    flat.narrow(0, 0, whole * s.chunk_numel).view({whole, s.chunk_numel}).copy_(blocks.narrow(0, 0, whole));
  if (rest > 0) flat.narrow(0, whole * s.chunk_numel, rest).copy_(blocks.select(0, whole).narrow(0, 0, rest));
}

}  // namespace mpiaccel::detail
