#pragma once
// Which gradients share a bucket (one flat tensor and one all-reduce), as
// PyTorch's compute_bucket_assignment_by_size does it: gradients are taken in
// a given order (reverse parameter order at first, the observed ready order
// after the rebuild), grouped by (dtype, device), and a group's bucket is
// closed when the next gradient would exceed the cap. The first bucket of each
// group is capped at `first_cap_bytes` (at most `cap_bytes`) so the first
// all-reduce starts early in backward. Buckets are then ordered by their first gradient's position in the
// order, which is the order they become ready and are launched.

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <vector>

namespace mpiaccel::detail {

struct GradInfo {
  at::ScalarType dtype = at::kFloat;
  c10::Device device = c10::Device(c10::kCPU);
  int64_t bytes = 0;
};

/// What the assignment needs of each tensor.
std::vector<GradInfo> grad_infos(const std::vector<at::Tensor>& tensors);
/// n-1, ..., 0: the order before any backward was seen (backward produces the
/// last layers' gradients first).
std::vector<size_t> reverse_order(size_t n);

/// Parameter indices per bucket, buckets in launch order. `order` lists every
/// index of `grads` once. A bucket never exceeds its cap unless it holds a
/// single gradient that alone does.
std::vector<std::vector<size_t>> assign_buckets(const std::vector<GradInfo>& grads,
                                                const std::vector<size_t>& order,
                                                int64_t first_cap_bytes, int64_t cap_bytes);

}  // namespace mpiaccel::detail
