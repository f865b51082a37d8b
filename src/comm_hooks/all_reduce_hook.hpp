#pragma once
// The all-reduce every hook falls back on: a flat tensor summed over the
// ranks and divided by their number, in the tensor's dtype or in a 16-bit
// wire dtype with the division split around the sum (docs/precision.md,
// "Communication in the policy's dtypes").

#include <ATen/core/Tensor.h>

#include <optional>

#include "mpiaccel/comm.hpp"
#include "mpiaccel/comm_hook.hpp"
#include "mpiaccel/precision.hpp"

namespace mpiaccel::detail {

/// Starts averaging `values` over `comm`. `wire`: a tensor of values' size in
/// the dtype to send, or undefined to send `values` as they are. `division`:
/// gradient_division() of the dtype the caller asked for on the wire. The
/// returned finish() writes the average back into `values`.
HookWork average_async(Communicator& comm, at::Tensor values, at::Tensor wire, const GradientDivision& division);

}  // namespace mpiaccel::detail
