#pragma once
// Context parallelism (docs/parallelism.md): the sequence of each sample is
// split over the `cp_size` ranks of a cp group, and attention, the one place
// where positions meet, exchanges what it needs:
//
//   ring      each rank keeps its queries; key/value blocks travel around the
//             group in cp steps, and the partial softmax results of each
//             block are merged by their log-sum-exp (ring attention). Any
//             head count.
//   alltoall  an all-to-all swaps sequence shards for head shards, each rank
//             attends over the whole sequence with n_head/cp heads, and a
//             second all-to-all swaps back (Ulysses). Heads must divide by cp.
//
// The layout is load-balanced for causal attention ("zigzag"): the sequence
// is cut into 2·cp chunks and rank r holds chunks r and 2·cp−1−r, so every
// rank attends over as many key positions as every other.
//
//   at::Tensor mine = cp::zigzag_shard(tokens, 1, *group);          // [B, T/cp]
//   at::Tensor pos = cp::zigzag_positions(T, *group, options);       // global ids
//   at::Tensor y = cp::causal_attention(q, k, v, group, cp::Exchange::Ring);

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>

#include "mpiaccel/config_choices.hpp"

namespace mpiaccel {

class Communicator;

namespace cp {

/// How attention exchanges between the ranks of a cp group ([parallelism]
/// cp_comm_strategy: ring or alltoall).
using Exchange = CpCommStrategy;

/// Throws Error unless `exchange` can split `heads` attention heads (a
/// rank's) over `ranks` cp ranks: alltoall needs them to divide.
void check_heads(Exchange exchange, int64_t heads, int64_t ranks);

/// The length of each rank's zigzag shard of `time` positions: time / size.
/// Throws Error, naming the length, when 2·size does not divide it.
int64_t shard_length(int64_t time, const Communicator& group);

/// This rank's zigzag shard of `x` along `dim`: chunks r and 2·size−1−r of
/// 2·size equal chunks, concatenated. Throws Error, naming the length, when
/// 2·size does not divide it.
at::Tensor zigzag_shard(const at::Tensor& x, int64_t dim, const Communicator& group);

/// The global positions [time / size] of this rank's zigzag shard of a
/// sequence of `time` positions starting at 0, as int64 with `options`' device.
at::Tensor zigzag_positions(int64_t time, const Communicator& group, const at::TensorOptions& options);

/// Causal attention softmax(q kᵀ / sqrt(d) + mask) v of the whole sequence,
/// computed on zigzag shards: q is [batch, heads, time/cp, head_dim], this
/// rank's shard, and k, v [batch, kv heads, time/cp, head_dim] with kv heads
/// dividing heads (grouped-query attention: each serves heads / kv
/// consecutive query heads; the ring passes them unrepeated);
/// returns this rank's shard of the output. Differentiable (its backward
/// passes the blocks around again, their gradients beside them; the
/// all-to-all's backward swaps back). Collective over `group`; every
/// message has the group's deadline and names the ring step or the
/// all-to-all. No dropout on the attention weights.
at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const std::shared_ptr<Communicator>& group, Exchange exchange);

}  // namespace cp
}  // namespace mpiaccel
