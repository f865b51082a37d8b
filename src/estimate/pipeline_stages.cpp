// estimate-memory under pipeline parallelism (estimate.hpp): a rank holds its
// stages' pieces of the model, and the activations of the microbatches its
// schedule keeps in flight.

#include <algorithm>
#include <string>
#include <vector>

#include "mpiaccel/error.hpp"
#include "mpiaccel/estimate.hpp"
#include "mpiaccel/model_family.hpp"
#include "mpiaccel/pipeline_schedule.hpp"
#include "estimate/pipeline_stages.hpp"

namespace mpiaccel {
namespace {

PipelinePieceTensors piece_tensors(const std::string& kind, const ModelSpec& spec) {
  const ModelFamily& family = model_family(kind);
  MPIACCEL_CHECK(family.pipeline_piece_tensors != nullptr, "estimate-memory: [parallelism] pp_size > 1 needs a [train] model "
                                                    "that can be cut into stages (" + kind +
                                                    " does not declare pipeline pieces)");
  return family.pipeline_piece_tensors(spec);
}

int64_t count(const std::vector<ParamRows>& tensors) {
  int64_t n = 0;
  for (const ParamRows& t : tensors) n += t.rows * t.row_numel;
  return n;
}

// The activations of one microbatch through `layers` layers, with the head's
// only on the last stage: activation_bytes is linear in the layer count, so
// the head's share is what one layer's call has beyond one layer.
int64_t stage_activations(const std::string& kind, const ModelSpec& spec, int64_t layers, bool last,
                          int64_t microbatch, int64_t element_bytes, const EstimateSettings& s) {
  auto with = [&](int64_t n, bool checkpointing) {
    ModelSpec one = spec;
    one.n_layer = n;
    return activation_bytes(kind, one, microbatch, element_bytes, checkpointing, s.tp_size, s.sequence_parallel);
  };
  const int64_t head = 2 * with(1, false) - with(2, false);
  return with(layers, s.activation_checkpointing) - (last ? 0 : head);
}

// The microbatches (interleaved: stage-microbatches) rank r keeps in flight
// at its peak.
int64_t in_flight(PipelineScheduleKind kind, int64_t r, int64_t p, int64_t m, int64_t v) {
  switch (kind) {
    case PipelineScheduleKind::GPipe: return m;
    case PipelineScheduleKind::Interleaved1F1B: return std::min(2 * (p - r - 1) + (v - 1) * p + 1, m * v);
    default: return std::min(p - r, m);
  }
}

}  // namespace

ModelFootprint pipeline_stage_footprint(const std::string& kind, const ModelSpec& spec, int64_t tp,
                                        const std::vector<std::pair<int64_t, int64_t>>& stages) {
  const PipelinePieceTensors pieces = piece_tensors(kind, spec);
  ModelFootprint whole = model_footprint(kind, spec, tp);
  const size_t per_layer = (whole.tensors.size() - pieces.first - pieces.last) / static_cast<size_t>(spec.n_layer);
  const auto begin = whole.tensors.begin();
  const std::vector<ParamRows> first(begin, begin + static_cast<long>(pieces.first));
  const std::vector<ParamRows> last(whole.tensors.end() - static_cast<long>(pieces.last), whole.tensors.end());
  ModelFootprint f;
  f.kind = kind;
  f.largest_unit_params = whole.largest_unit_params;
  bool holds_first = false, holds_last = false;
  for (const auto& [layer_begin, layer_end] : stages) {
    auto from = begin + static_cast<long>(pieces.first + per_layer * static_cast<size_t>(layer_begin));
    f.tensors.insert(f.tensors.end(), from, from + static_cast<long>(per_layer * static_cast<size_t>(layer_end - layer_begin)));
    f.units += layer_end - layer_begin;
    holds_first = holds_first || layer_begin == 0;
    holds_last = holds_last || layer_end == spec.n_layer;
  }
  std::vector<ParamRows> root;
  if (holds_first) root.insert(root.end(), first.begin(), first.end());
  if (holds_last) root.insert(root.end(), last.begin(), last.end());
  if (holds_last && pieces.tied && !holds_first) root.push_back(first.front());
  f.tensors.insert(f.tensors.begin(), root.begin(), root.end());
  f.root_params = count(root);
  f.params = count(f.tensors);
  return f;
}

namespace detail {

std::vector<MemoryEstimate> estimate_pipeline(const Config& config, const ModelSpec& spec,
                                              const EstimateSettings& settings, const RowsOf& rows_of) {
  const ParallelismConfig& pc = config.parallelism;
  const std::string& kind = config.train.model;
  const PipelineScheduleKind schedule = pc.pp_schedule;
  const int64_t p = pc.pp_size;
  const int64_t v = pc.pp_virtual_stages > 0 ? pc.pp_virtual_stages
                                             : (schedule == PipelineScheduleKind::Interleaved1F1B ? 2 : 1);
  const int64_t m = pc.pp_microbatches > 0 ? pc.pp_microbatches : config.train.grad_accum_steps;
  const int64_t microbatch = std::max<int64_t>(1, settings.batch_size * config.train.grad_accum_steps / m);
  // The cut the Pipeline makes: layers balanced by parameter count, the
  // last piece's (the head's) on the last stage.
  const ModelFootprint whole = model_footprint(kind, spec, settings.tp_size);
  const std::vector<double> costs(static_cast<size_t>(spec.n_layer), static_cast<double>(whole.largest_unit_params));
  const double head = static_cast<double>(pipeline_stage_footprint(kind, spec, settings.tp_size, {{spec.n_layer, spec.n_layer}}).params);
  const auto cut = pipeline_cut(costs, 0.0, head, p * v, pc.pp_layers);
  // Each rank's rows; the heaviest rank's, per row.
  std::vector<MemoryEstimate> worst;
  for (int64_t r = 0; r < p; ++r) {
    std::vector<std::pair<int64_t, int64_t>> mine;
    int64_t layers = 0;
    bool last = false;
    for (int64_t s = r; s < p * v; s += p) {
      mine.push_back(cut[static_cast<size_t>(s)]);
      layers += mine.back().second - mine.back().first;
      last = last || s == p * v - 1;
    }
    std::vector<MemoryEstimate> rows = rows_of(pipeline_stage_footprint(kind, spec, settings.tp_size, mine));
    const int64_t flights = in_flight(schedule, r, p, m, v);
    for (MemoryEstimate& row : rows) {
      // A stage-microbatch's activations are those of one of the rank's v stages.
      row.activation_bytes = flights * stage_activations(kind, spec, std::max<int64_t>(1, layers / v), last,
                                                         microbatch, row.mixed_precision == MixedPrecision::No ? 4 : 2, settings);
      row.pp_size = static_cast<int>(p);
      row.world_size *= static_cast<int>(p);
    }
    if (worst.empty()) worst = rows;
    for (size_t i = 0; i < rows.size(); ++i)
      if (rows[i].device_peak_bytes() > worst[i].device_peak_bytes()) worst[i] = rows[i];
  }
  return worst;
}

}  // namespace detail
}  // namespace mpiaccel
