#pragma once
// Internal: estimate-memory's rows under pipeline parallelism
// (pipeline_stages.cpp).

#include <functional>
#include <vector>

#include "mpiaccel/config.hpp"
#include "mpiaccel/estimate.hpp"

namespace mpiaccel::detail {

/// Every strategy's and precision's rows for one rank holding `model`.
using RowsOf = std::function<std::vector<MemoryEstimate>(const ModelFootprint& model)>;

/// The rows of the heaviest pipeline rank, row by row: each rank's stages
/// of [parallelism] pp_size (the cut the Pipeline makes), model states from
/// their footprint, activations of the microbatches the schedule keeps in
/// flight on it (gpipe: all m; 1f1b and zb_h1: p - r; interleaved: its
/// warm-up's stage-microbatches). The data-parallel ranks are `settings`'.
std::vector<MemoryEstimate> estimate_pipeline(const Config& config, const ModelSpec& spec,
                                              const EstimateSettings& settings, const RowsOf& rows_of);

}  // namespace mpiaccel::detail
