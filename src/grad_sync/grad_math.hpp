#pragma once
// Gradient arithmetic the strategies share once their gradients are
// synchronized: the global norm (of replicated gradients, where every rank
// holds every averaged gradient and the norm is local; of sharded ones, where
// each rank holds its rows and one all-reduce sums them), scaling, zeroing,
// and byte counts for the memory account.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace mpiaccel {
class Communicator;
}

namespace mpiaccel::detail {

/// sqrt(sum of squared L2 norms) of the defined gradients, in double.
double local_grad_norm(const std::vector<at::Tensor>& params);
/// The global L2 norm, in double, of gradients split into shards over the
/// ranks of `comm` (FSDP, ZeRO-2): `shard_grads` are this rank's, each
/// defined one a term of the local sum of squares, in the order given (the
/// grouping of a floating-point sum follows the list, so the same list gives
/// the same bits). With `replicas` > 1 every shard is held by that many
/// ranks (HYBRID_SHARD), and the world's sum counts it once per replica.
/// Collective over comm (one all-reduce): every rank calls it, in the same
/// order, even with no shard of its own.
double sharded_grad_norm(Communicator& comm, const std::vector<at::Tensor>& shard_grads,
                         int replicas = 1);
void scale_local_grads(const std::vector<at::Tensor>& params, double factor);
/// Zeroes defined gradients in place (never resets them to undefined, so
/// gradient bucket views stay bound).
void zero_local_grads(const std::vector<at::Tensor>& params);
/// What this LibTorch's Optimizer::zero_grad() does: undefined gradients in
/// 2.x, zeroed in place in 1.13 (runtime/torch_compat.hpp).
void reset_local_grads(const std::vector<at::Tensor>& params);
int64_t tensor_bytes(const std::vector<at::Tensor>& tensors);
int64_t grad_bytes(const std::vector<at::Tensor>& params);

}  // namespace mpiaccel::detail
