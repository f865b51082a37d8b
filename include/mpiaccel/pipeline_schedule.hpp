#pragma once
// Pipeline schedules and stage cuts: which rank runs which microbatch's
// forward and backward of which stage, in what order, and which layers each
// stage holds (include/mpiaccel/pipeline.hpp, docs/parallelism.md).

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "mpiaccel/config_choices.hpp"  // PipelineScheduleKind

namespace mpiaccel {


/// One step of a rank's schedule: Forward, Backward (input and weight
/// gradients together), or, split (ZB-H1), BackwardInput then BackwardWeight.
struct PipelineAction {
  enum class Kind { Forward, Backward, BackwardInput, BackwardWeight };
  Kind kind = Kind::Forward;
  int64_t microbatch = 0;
  int64_t stage = 0;  ///< global stage; lives on rank stage % ranks
};

/// The actions of pipeline rank `rank` of `ranks`, each holding
/// `virtual_stages` stages (rank r holds stages r, r + ranks, ...), for
/// `microbatches` microbatches. Throws Error, in one line, for fewer
/// microbatches than 1F1B-style schedules need (ranks; interleaved: a
/// multiple of ranks).
std::vector<PipelineAction> pipeline_schedule(PipelineScheduleKind kind, int64_t rank, int64_t ranks,
                                              int64_t virtual_stages, int64_t microbatches);

/// The layers [begin, end) of each of `stages` stages. `spec` ("0-3,4-7")
/// gives them; empty balances `costs` (one per layer; the first piece's cost
/// is added to the first stage, the last piece's to the last) so that the
/// costliest stage costs least. Throws Error for more stages than layers or
/// a spec that does not cover the layers once, in order.
std::vector<std::pair<int64_t, int64_t>> pipeline_cut(const std::vector<double>& costs, double first_cost,
                                                      double last_cost, int64_t stages, const std::string& spec);

}  // namespace mpiaccel
