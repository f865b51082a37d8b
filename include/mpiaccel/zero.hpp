#pragma once
// ZeRO (Rajbhandari et al., SC'20) stages 1 and 2, with the optimizer step
// optionally offloaded to host memory (ZeRO-Offload); docs/zero.md.
//
// Every rank keeps the whole model. Each parameter's dim-0 rows are split over
// the ranks with torch.chunk semantics (chunk_row_range, as FSDP), and the
// optimizer is re-pointed at this rank's rows ("shard parameters"), so its
// state shrinks to 1/N:
//   stage 1: gradients all-reduced (the DDP reducer), each rank steps its rows,
//            updated rows all-gathered into the full parameters;
//   stage 2: gradients reduce-scattered in buckets as backward produces them,
//            so a rank only keeps its rows of every gradient; then as stage 1.
// Stage 3 is FSDP's full shard and stage 0 is DDP: make_strategy routes them.
// The host step of ZeRO-Offload is mpiaccel/optim.hpp's host_adamw_step.

#include <memory>

#include "mpiaccel/config.hpp"
#include "mpiaccel/precision.hpp"
#include "mpiaccel/strategy.hpp"

namespace mpiaccel {

class Communicator;

/// ZeRO stage 1 or 2 over `comm`, configured by [zero] (stage, offload_optimizer,
/// reduce_bucket_mb, allgather_bucket_mb). Throws mpiaccel::Error for any other
/// stage (make_strategy routes stage 0 to DDP and 3 to FSDP full shard),
/// offload_param = cpu, and out-of-range values.
/// Gradients are reduced in `precision.reduce_dtype` (docs/precision.md).
/// Every Strategy call is collective over comm.
std::unique_ptr<Strategy> make_zero_strategy(const ZeroConfig& config,
                                             std::shared_ptr<Communicator> comm,
                                             const PrecisionPolicy& precision = {});

}  // namespace mpiaccel
