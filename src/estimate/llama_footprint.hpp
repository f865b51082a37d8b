#pragma once
// The Llama's parameters and activations in closed form (footprint.cpp holds
// the other bundled models'); mirrors src/models/llama.cpp layer by layer.

#include <cstdint>

#include "mpiaccel/estimate.hpp"

namespace mpiaccel::detail {

/// Fills `out` (params, units, root and largest unit, tensors in
/// registration order) for a Llama of `spec`, as one rank of `tp`
/// tensor-parallel ranks holds it.
void llama_footprint(const ModelSpec& spec, int64_t tp, ModelFootprint& out);

/// Bytes of activations kept for backward by a Llama of `spec` at `batch`
/// sequences, activations of `element_bytes`, on one rank of `tp` (with or
/// without sequence parallelism).
int64_t llama_activation_bytes(const ModelSpec& spec, int64_t batch, int64_t element_bytes, bool checkpointing,
                               int64_t tp, bool sequence_parallel);

}  // namespace mpiaccel::detail
