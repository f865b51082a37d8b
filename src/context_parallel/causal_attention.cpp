// cp::causal_attention: the exchange the group was asked for (context_parallel.hpp).

#include <ATen/ATen.h>

#include "context_parallel/ring_attention.hpp"
#include "mpiaccel/comm.hpp"
#include "mpiaccel/context_parallel.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel::cp {

at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const std::shared_ptr<Communicator>& group, Exchange exchange) {
  MPIACCEL_CHECK(group != nullptr, "cp::causal_attention: no cp group");
  MPIACCEL_CHECK(q.dim() == 4 && k.sizes() == v.sizes() && q.size(2) == k.size(2) && q.size(2) % 2 == 0,
                 "cp::causal_attention takes zigzag shards q, k, v [batch, heads, time/cp, head_dim] of one "
                 "even length");
  return exchange == Exchange::Ring ? detail::ring_attention(q, k, v, group)
                                    : detail::all_to_all_attention(q, k, v, group);
}

}  // namespace mpiaccel::cp
