// cp::causal_attention: the exchange the group was asked for (context_parallel.hpp).

#include <ATen/ATen.h>

#include <string>

#include "context_parallel/block_attention.hpp"
#include "context_parallel/ring_attention.hpp"
#include "mpiaccel/comm.hpp"
#include "mpiaccel/context_parallel.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel::cp {
namespace {
std::string shape(const at::Tensor& t) {
  std::string text;
  for (int64_t size : t.sizes()) text += (text.empty() ? "[" : ", ") + std::to_string(size);
  return text + "]";
}
}  // namespace

at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const std::shared_ptr<Communicator>& group, Exchange exchange) {
  MPIACCEL_CHECK(group != nullptr, "cp::causal_attention: no cp group");
  const bool grouped = q.dim() == 4 && k.dim() == 4 && k.size(1) > 0 && q.size(1) % k.size(1) == 0;
  MPIACCEL_CHECK(grouped && k.sizes() == v.sizes() && q.size(0) == k.size(0) && q.size(2) == k.size(2) &&
                     q.size(3) == k.size(3) && q.size(2) % 2 == 0,
                 "cp::causal_attention takes zigzag shards q [batch, heads, time/cp, head_dim] and k, v [batch, "
                 "key/value heads, time/cp, head_dim] (heads a multiple of them) of an even length, not " +
                     shape(q) + ", " + shape(k) + ", " + shape(v));
  if (group->size() == 1) {
    const int64_t n_rep = q.size(1) / k.size(1);
    return detail::whole_causal_attention(q, detail::repeat_heads(k, n_rep), detail::repeat_heads(v, n_rep));
  }
  return exchange == Exchange::Ring ? detail::ring_attention(q, k, v, group)
                                    : detail::all_to_all_attention(q, k, v, group);
}

}  // namespace mpiaccel::cp
