// Bucket assignment by size (see bucket_layout.hpp).

#include "grad_sync/bucket_layout.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

#include "mpiaccel/error.hpp"

namespace mpiaccel::detail {
namespace {

struct Open {
  std::vector<size_t> members;
  int64_t bytes = 0;
  bool first = true;  // still the group's first bucket
};

}  // namespace

std::vector<GradInfo> grad_infos(const std::vector<at::Tensor>& tensors) {
  std::vector<GradInfo> infos;
  for (const at::Tensor& t : tensors)
    infos.push_back(GradInfo{t.scalar_type(), t.device(), t.numel() * t.element_size()});
  return infos;
}

std::vector<size_t> reverse_order(size_t n) {
  std::vector<size_t> order(n);
  for (size_t k = 0; k < n; ++k) order[k] = n - 1 - k;
  return order;
}

std::vector<std::vector<size_t>> assign_buckets(const std::vector<GradInfo>& grads,
                                                const std::vector<size_t>& order,
                                                int64_t first_cap_bytes, int64_t cap_bytes) {
  MPIACCEL_CHECK(order.size() == grads.size(),
                 "bucket assignment: the order lists " + std::to_string(order.size()) +
                     " gradients, expected " + std::to_string(grads.size()));
  MPIACCEL_CHECK(first_cap_bytes > 0 && cap_bytes > 0, "bucket assignment: caps must be positive");
  std::vector<int> seen(grads.size(), 0);
  std::vector<size_t> position(grads.size());
  for (size_t k = 0; k < order.size(); ++k) {
    MPIACCEL_CHECK(order[k] < grads.size() && !seen[order[k]]++,
                   "bucket assignment: the order is not a permutation of the gradients");
    position[order[k]] = k;
  }

  using Key = std::tuple<int, int, int>;  // dtype, device type, device index
  std::map<Key, Open> open;
  std::vector<std::vector<size_t>> closed;
  for (size_t index : order) {
    const GradInfo& g = grads[index];
    Open& bucket = open[Key(static_cast<int>(g.dtype), static_cast<int>(g.device.type()),
                            g.device.index())];
    const int64_t cap = bucket.first ? std::min(first_cap_bytes, cap_bytes) : cap_bytes;
    if (!bucket.members.empty() && bucket.bytes + g.bytes > cap) {
      closed.push_back(std::move(bucket.members));
      bucket.members.clear();
      bucket.bytes = 0;
      bucket.first = false;
    }
    bucket.members.push_back(index);
    bucket.bytes += g.bytes;
  }
  for (auto& [key, bucket] : open)
    if (!bucket.members.empty()) closed.push_back(std::move(bucket.members));
  // Launch order = the order the buckets fill up in.
  std::sort(closed.begin(), closed.end(), [&](const auto& a, const auto& b) {
    return position[a.front()] < position[b.front()];
  });
  return closed;
}

}  // namespace mpiaccel::detail
