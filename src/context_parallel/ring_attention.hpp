#pragma once
// The two exchanges of context-parallel attention (context_parallel.hpp).

#include <ATen/core/Tensor.h>

#include <memory>

#include "mpiaccel/comm.hpp"

namespace mpiaccel::cp::detail {

/// Ring attention of zigzag shards q, k, v [B, H, T/cp, D].
at::Tensor ring_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const std::shared_ptr<Communicator>& group);

/// Ulysses: all-to-all to [B, H/cp, T, D], causal attention, all-to-all back.
at::Tensor all_to_all_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                const std::shared_ptr<Communicator>& group);

}  // namespace mpiaccel::cp::detail
